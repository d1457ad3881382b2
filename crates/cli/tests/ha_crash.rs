//! Master and slave as real processes (`ferromq namesrv`, two `ferromq broker`s): a
//! SYNC_MASTER that waits for one slave is killed with SIGKILL under load, and every message
//! it acknowledged is then read back from the slave (VIEW_MESSAGE_BY_ID at the physical
//! offset the acknowledgement carried: a slave's CommitLog has the master's offsets).

use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ferromq_protocol::header::{
    SendMessageRequestHeader, SendMessageRequestHeaderV2, SendMessageResponseHeader, ViewMessageRequestHeader,
};
use ferromq_protocol::message::{decode_offset_msg_id, StoredMessage};
use ferromq_protocol::{request_code, response_code, RemotingCommand};
use ferromq_remoting::{ClientConfig, RemotingClient};

const TOPIC: &str = "HaCrash";

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn(args: &[&str], conf: &Path, text: &str) -> Proc {
    std::fs::File::create(conf).unwrap().write_all(text.as_bytes()).unwrap();
    let logs = std::env::var_os("HA_TEST_LOGS").is_some();
    let child = Command::new(env!("CARGO_BIN_EXE_ferromq"))
        .args(args)
        .arg("-c")
        .arg(conf)
        .stdout(if logs { Stdio::inherit() } else { Stdio::null() })
        .stderr(if logs { Stdio::inherit() } else { Stdio::null() })
        .spawn()
        .unwrap();
    Proc(child)
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
