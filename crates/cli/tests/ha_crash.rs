//! Master and slave as real processes (`ferromq namesrv`, two `ferromq broker`s): a
//! SYNC_MASTER that waits for one slave is killed with SIGKILL under load, and every message
//! it acknowledged is then read back from the slave (VIEW_MESSAGE_BY_ID at the physical
//! offset the acknowledgement carried: a slave's CommitLog has the master's offsets). And a
//! slave started late catches up across several CommitLog files, is killed with SIGKILL while
//! the master keeps writing, resumes from its recovered offset, and ends with CommitLog files
//! identical to the master's and the same consume-queue offsets.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ferromq_protocol::header::{
    SendMessageRequestHeader, SendMessageRequestHeaderV2, SendMessageResponseHeader, ViewMessageRequestHeader,
};
use ferromq_protocol::message::{decode_offset_msg_id, StoredMessage};
use ferromq_protocol::{request_code, response_code, RemotingCommand};
use ferromq_remoting::{ClientConfig, RemotingClient};
use ferromq_testkit::{free_port, spawn_with_config, ChildProcess};

const TOPIC: &str = "HaCrash";

fn spawn(args: &[&str], conf: &Path, text: &str) -> ChildProcess {
    spawn_with_config(env!("CARGO_BIN_EXE_ferromq"), args, conf, text)
}

fn send(body: String) -> RemotingCommand {
    let h: SendMessageRequestHeaderV2 = SendMessageRequestHeader {
        producer_group: "pg".into(),
        topic: TOPIC.into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 4,
        queue_id: 0,
        born_timestamp: 1,
        ..Default::default()
    }
    .into();
    RemotingCommand::request(request_code::SEND_MESSAGE_V2).with_header(&h).with_body(body.into_bytes())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_message_a_sync_master_acknowledged_is_on_the_slave_after_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let (ns_port, master_port, master_ha, slave_port) = (free_port(), free_port(), free_port(), free_port());
    let ns = format!("127.0.0.1:{ns_port}");
    let master = format!("127.0.0.1:{master_port}");
    let slave = format!("127.0.0.1:{slave_port}");
    let _ns = spawn(&["namesrv"], &dir.path().join("ns.conf"), &format!("listenPort={ns_port}\n"));
    let common = |port: u16, id: u32, role: &str, store: &str| {
        format!(
            "brokerClusterName=HaCluster\nbrokerName=broker-ha\nbrokerId={id}\nbrokerRole={role}\nlistenPort={port}\n\
             brokerIP1=127.0.0.1\nbrokerIP2=127.0.0.1\nnamesrvAddr={ns}\nstorePathRootDir={}\n\
             mapedFileSizeCommitLog=1048576\nflushDiskType=ASYNC_FLUSH\ninSyncReplicas=2\nregisterNameServerPeriod=10000\n",
            dir.path().join(store).display()
        )
    };
    let mut master_proc = spawn(
        &["broker"],
        &dir.path().join("master.conf"),
        &format!("{}haListenPort={master_ha}\n", common(master_port, 0, "SYNC_MASTER", "m")),
    );
    let _slave_proc = spawn(&["broker"], &dir.path().join("slave.conf"), &common(slave_port, 1, "SLAVE", "s"));

    // Wait until a send is acknowledged: the master is up and the slave connected.
    let client = Arc::new(RemotingClient::new(ClientConfig::default()));
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(r) = client.invoke(&master, send("warmup".into()), Duration::from_secs(2)).await {
            if r.code == response_code::SUCCESS {
                break;
            }
        }
        assert!(Instant::now() < deadline, "master and slave never came up together");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // (body, physical offset) of every acknowledged send.
    let acked = Arc::new(Mutex::new(Vec::new()));
    let mut senders = tokio::task::JoinSet::new();
    for s in 0..8 {
        let (client, master, acked) = (client.clone(), master.clone(), acked.clone());
        senders.spawn(async move {
            for i in 0..1_000_000u64 {
                let body = format!("s{s}-{i}");
                match client.invoke(&master, send(body.clone()), Duration::from_secs(5)).await {
                    Ok(r) if r.code == response_code::SUCCESS => {
                        let h = r.decode_header::<SendMessageResponseHeader>().unwrap();
                        let (_, offset) = decode_offset_msg_id(&h.msg_id).unwrap();
                        acked.lock().unwrap().push((body, offset));
                    }
                    _ => return,
                }
            }
        });
    }
    let kill_after =
        400 + (std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_millis() % 600);
    tokio::time::sleep(Duration::from_millis(u64::from(kill_after))).await;
    master_proc.0.kill().unwrap(); // SIGKILL
    master_proc.0.wait().unwrap();
    while senders.join_next().await.is_some() {}
    let acked = acked.lock().unwrap().clone();
    assert!(acked.len() > 20, "the load ran ({} acks)", acked.len());

    let mut missing = Vec::new();
    for (body, offset) in &acked {
        let view = RemotingCommand::request(request_code::VIEW_MESSAGE_BY_ID)
            .with_header(&ViewMessageRequestHeader { topic: None, offset: *offset });
        let r = client.invoke(&slave, view, Duration::from_secs(5)).await.unwrap();
        let found = r.code == response_code::SUCCESS
            && StoredMessage::decode_all(&r.body).is_ok_and(|m| m.first().is_some_and(|m| m.body == body.as_bytes()));
        if !found {
            missing.push(body.clone());
        }
    }
    assert!(
        missing.is_empty(),
        "{} acknowledged messages not on the slave, e.g. {:?}",
        missing.len(),
        &missing[..missing.len().min(5)]
    );
    println!("killed the master after {kill_after} ms; all {} acknowledged messages are on the slave", acked.len());
    client.shutdown().await;
}

async fn runtime_info(client: &RemotingClient, addr: &str) -> Option<std::collections::BTreeMap<String, String>> {
    let req = RemotingCommand::request(request_code::GET_BROKER_RUNTIME_INFO);
    let r = client.invoke(addr, req, Duration::from_secs(3)).await.ok()?;
    (r.code == response_code::SUCCESS)
        .then(|| <ferromq_protocol::body::KVTable as ferromq_protocol::body::JsonBody>::decode(&r.body).ok())
        .flatten()
        .map(|t| t.table)
}

/// Waits until the slave's CommitLog ends where the master's does.
async fn wait_caught_up(client: &RemotingClient, master: &str, slave: &str) -> i64 {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let m = runtime_info(client, master).await.and_then(|t| t.get("commitLogMaxOffset").cloned());
        let s = runtime_info(client, slave).await.and_then(|t| t.get("haSlaveMaxOffset").cloned());
        if let (Some(m), Some(s)) = (m, s) {
            if m == s {
                return m.parse().unwrap();
            }
        }
        assert!(Instant::now() < deadline, "the slave never caught up");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn send_many(client: &RemotingClient, master: &str, from: usize, to: usize) {
    for i in from..to {
        let body = format!("{i:0>1000}"); // ~1 KiB
        let r = client.invoke(master, send(body), Duration::from_secs(5)).await.unwrap();
        assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_and_killed_slave_catches_up_to_identical_commit_log_files() {
    let dir = tempfile::tempdir().unwrap();
    let (ns_port, master_port, master_ha, slave_port) = (free_port(), free_port(), free_port(), free_port());
    let ns = format!("127.0.0.1:{ns_port}");
    let master = format!("127.0.0.1:{master_port}");
    let slave = format!("127.0.0.1:{slave_port}");
    let _ns = spawn(&["namesrv"], &dir.path().join("ns.conf"), &format!("listenPort={ns_port}\n"));
    let conf = |port: u16, id: u32, role: &str, store: &str, extra: &str| {
        format!(
            "brokerClusterName=HaCluster\nbrokerName=broker-cu\nbrokerId={id}\nbrokerRole={role}\nlistenPort={port}\n\
             brokerIP1=127.0.0.1\nbrokerIP2=127.0.0.1\nnamesrvAddr={ns}\nstorePathRootDir={}\n\
             mapedFileSizeCommitLog=1048576\nflushDiskType=ASYNC_FLUSH\n{extra}",
            dir.path().join(store).display()
        )
    };
    let _master = spawn(
        &["broker"],
        &dir.path().join("m.conf"),
        &conf(master_port, 0, "ASYNC_MASTER", "m", &format!("haListenPort={master_ha}\n")),
    );
    let client = RemotingClient::new(ClientConfig::default());
    let deadline = Instant::now() + Duration::from_secs(30);
    while !client
        .invoke(&master, send("warmup".into()), Duration::from_secs(2))
        .await
        .is_ok_and(|r| r.code == response_code::SUCCESS)
    {
        assert!(Instant::now() < deadline, "master never came up");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // About three CommitLog files before the slave exists.
    send_many(&client, &master, 0, 3_000).await;
    let slave_conf = conf(slave_port, 1, "SLAVE", "s", &format!("haMasterAddress=127.0.0.1:{master_ha}\n"));
    let mut slave_proc = spawn(&["broker"], &dir.path().join("s.conf"), &slave_conf);
    wait_caught_up(&client, &master, &slave).await;
    // Killed while the master keeps writing; restarted on its own data, it resumes.
    let writer = {
        let master = master.clone();
        tokio::spawn(async move {
            let client = RemotingClient::new(ClientConfig::default());
            send_many(&client, &master, 3_000, 5_000).await;
            client.shutdown().await;
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    slave_proc.0.kill().unwrap(); // SIGKILL
    slave_proc.0.wait().unwrap();
    drop(slave_proc);
    writer.await.unwrap();
    let _slave_proc = spawn(&["broker"], &dir.path().join("s.conf"), &slave_conf);
    let end = wait_caught_up(&client, &master, &slave).await;

    // Byte-identical CommitLog files, from the slave's first file on (it started at the
    // master's last file when it was empty).
    let files = |store: &str| {
        let mut names: Vec<String> = std::fs::read_dir(dir.path().join(store).join("commitlog"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    };
    let slave_files = files("s");
    assert!(slave_files.len() >= 2, "the slave holds several files: {slave_files:?}");
    for name in &slave_files {
        let start: i64 = name.parse().unwrap();
        if start >= end {
            continue; // a pre-created, empty next file
        }
        let m = std::fs::read(dir.path().join("m/commitlog").join(name)).unwrap();
        let s = std::fs::read(dir.path().join("s/commitlog").join(name)).unwrap();
        let upto = usize::try_from((end - start).min(m.len() as i64)).unwrap();
        assert!(m[..upto] == s[..upto], "CommitLog file {name} differs between master and slave");
    }
    // The consume queues agree: every queue's max offset.
    for queue_id in 0..4 {
        let max = |addr: String| {
            let client = &client;
            async move {
                let req = RemotingCommand::request(request_code::GET_MAX_OFFSET).with_header(
                    &ferromq_protocol::header::GetMaxOffsetRequestHeader {
                        topic: TOPIC.into(),
                        queue_id,
                        committed: None,
                        broker_name: None,
                        lo: None,
                    },
                );
                let r = client.invoke(&addr, req, Duration::from_secs(3)).await.unwrap();
                r.decode_header::<ferromq_protocol::header::OffsetResponseHeader>().unwrap().offset
            }
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let (m, s) = (max(master.clone()).await, max(slave.clone()).await);
            if m == s {
                break;
            }
            assert!(Instant::now() < deadline, "queue {queue_id}: master {m}, slave {s}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    println!("slave caught up to {end} bytes across {} files, twice", slave_files.len());
    client.shutdown().await;
}
