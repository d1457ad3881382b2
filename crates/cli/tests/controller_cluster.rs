//! `ferromq controller`: three nodes as processes form a Raft group; brokers (played by the
//! test over real TCP) take ids, register, heartbeat and elect a master; the leader is
//! SIGKILLed and the metadata survives on the new leader; the master stops heartbeating and
//! the controller elects the in-sync replica and tells it (NOTIFY_BROKER_ROLE_CHANGED); the
//! killed node restarts from its store and rejoins.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::cluster::spawn_listening;
use ferromq_protocol::header::{
    AlterSyncStateSetRequestHeader, AlterSyncStateSetResponseHeader, ApplyBrokerIdRequestHeader,
    BrokerHeartbeatRequestHeader, ElectMasterRequestHeader, ElectMasterResponseHeader, GetMetaDataResponseHeader,
    GetNextBrokerIdRequestHeader, GetNextBrokerIdResponseHeader, GetReplicaInfoRequestHeader,
    GetReplicaInfoResponseHeader, NotifyBrokerRoleChangedRequestHeader, RegisterBrokerToControllerRequestHeader,
    RegisterBrokerToControllerResponseHeader,
};
use ferromq_protocol::{request_code, response_code, RemotingCommand};
use ferromq_remoting::{ClientConfig, Dispatcher, RemotingClient, RemotingServer, ServerConfig};
use ferromq_testkit::{free_port, ChildProcess};

const T: Duration = Duration::from_secs(5);

struct Node {
    name: String,
    port: u16,
    conf_text: String,
    dir: std::path::PathBuf,
    process: Option<ChildProcess>,
}

impl Node {
    fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn start(&mut self) {
        let conf = self.dir.join(format!("{}.conf", self.name));
        let log = self.dir.join(format!("{}.log", self.name));
        self.process = Some(spawn_listening(&["controller"], &conf, &self.conf_text, &log, self.port).unwrap());
    }

    fn kill(&mut self) {
        if let Some(mut p) = self.process.take() {
            let _ = p.0.kill();
            let _ = p.0.wait();
        }
    }
}

fn nodes(dir: &Path) -> Vec<Node> {
    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let peers: Vec<String> = ports.iter().enumerate().map(|(i, p)| format!("n{i}-127.0.0.1:{p}")).collect();
    (0..3)
        .map(|i| Node {
            name: format!("n{i}"),
            port: ports[i],
            conf_text: format!(
                "controllerDLegerGroup=g1\ncontrollerDLegerPeers={}\ncontrollerDLegerSelfId=n{i}\n\
                 controllerStorePath={}\nscanInactiveMasterInterval=300\ncontrollerHeartBeatTimeoutMills=2000\n\
                 configStorePath={}\n",
                peers.join(";"),
                dir.join(format!("store-n{i}")).display(),
                dir.join(format!("n{i}.properties")).display()
            ),
            dir: dir.to_owned(),
            process: None,
        })
        .collect()
}

async fn call(client: &RemotingClient, addr: &str, req: RemotingCommand) -> RemotingCommand {
    client.invoke(addr, req, T).await.unwrap_or_else(|e| panic!("{addr}: {e}"))
}

/// The leader's address, once every running node names the same one (not `not`).
async fn leader(client: &RemotingClient, nodes: &[&Node], not: Option<&str>) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let mut named = Vec::new();
        for n in nodes {
            if let Ok(r) =
                client.invoke(&n.addr(), RemotingCommand::request(request_code::CONTROLLER_GET_METADATA_INFO), T).await
            {
                let h: GetMetaDataResponseHeader = r.decode_header().unwrap();
                named.push(h.controller_leader_address);
            }
        }
        if named.len() == nodes.len() && named.iter().all(|l| l.is_some() && *l == named[0] && l.as_deref() != not) {
            return named[0].clone().unwrap();
        }
        assert!(Instant::now() < deadline, "no agreed leader within 20 s: {named:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn admin_output(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_ferromq"))
        .arg("admin")
        .args(args)
        .env_remove("NAMESRV_ADDR")
        .output()
        .unwrap()
}

/// Runs `ferromq admin args` (no name server given); its stdout, which it must succeed.
fn admin(args: &[&str]) -> String {
    let out = admin_output(args);
    assert!(out.status.success(), "admin {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs `ferromq admin args`, which must fail; its stderr.
fn admin_fails(args: &[&str]) -> String {
    let out = admin_output(args);
    assert!(!out.status.success(), "admin {args:?} succeeded: {}", String::from_utf8_lossy(&out.stdout));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn heartbeat(id: i64, addr: &str) -> RemotingCommand {
    heartbeat_for(id, addr, 2000)
}

fn heartbeat_for(id: i64, addr: &str, timeout_ms: i64) -> RemotingCommand {
    RemotingCommand::request(request_code::BROKER_HEARTBEAT).with_header(&BrokerHeartbeatRequestHeader {
        cluster_name: "c1".into(),
        broker_addr: addr.into(),
        broker_name: "broker-a".into(),
        broker_id: Some(id),
        epoch: Some(1),
        max_offset: Some(1000),
        confirm_offset: Some(1000),
        heartbeat_timeout_mills: Some(timeout_ms),
        election_priority: None,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_controllers_elect_fail_over_and_replace_a_dead_master() {
    let dir = tempfile::tempdir().unwrap();
    let mut nodes = nodes(dir.path());
    for n in &mut nodes {
        n.start();
    }
    let client = RemotingClient::new(ClientConfig::default());
    let first_leader = leader(&client, &nodes.iter().collect::<Vec<_>>(), None).await;

    // A follower refuses broker requests and names the leader.
    let follower = nodes.iter().find(|n| n.addr() != first_leader).unwrap().addr();
    let next = |name: &str| {
        RemotingCommand::request(request_code::CONTROLLER_GET_NEXT_BROKER_ID)
            .with_header(&GetNextBrokerIdRequestHeader { cluster_name: "c1".into(), broker_name: name.into() })
    };
    let r = call(&client, &follower, next("broker-a")).await;
    assert_eq!(r.code, response_code::CONTROLLER_NOT_LEADER);
    assert!(r.remark.as_deref().unwrap_or_default().contains(&first_leader), "{:?}", r.remark);

    // Broker 2 listens for the controller's role-change notification.
    let (notified_tx, mut notified) = tokio::sync::mpsc::unbounded_channel();
    let mut d = Dispatcher::new();
    d.register_sync(request_code::NOTIFY_BROKER_ROLE_CHANGED, move |_conn, req| {
        let h: NotifyBrokerRoleChangedRequestHeader = req.decode_header().unwrap();
        let _ = notified_tx.send(h);
        Some(RemotingCommand::response(response_code::SUCCESS, None))
    });
    let broker2 = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let broker2_addr = broker2.local_addr().unwrap().to_string();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        RemotingServer::new(ServerConfig::default(), Arc::new(d))
            .serve(broker2, async move {
                let _ = stopped.await;
            })
            .await
    });
    let broker1_addr = "127.0.0.1:1".to_owned();

    // Ids 1 and 2, registration, heartbeats, the first election.
    for (id, addr) in [(1i64, &broker1_addr), (2, &broker2_addr)] {
        let r = call(&client, &first_leader, next("broker-a")).await;
        let h: GetNextBrokerIdResponseHeader = r.decode_header().unwrap();
        assert_eq!(h.next_broker_id, Some(id));
        let apply = RemotingCommand::request(request_code::CONTROLLER_APPLY_BROKER_ID).with_header(
            &ApplyBrokerIdRequestHeader {
                cluster_name: "c1".into(),
                broker_name: "broker-a".into(),
                applied_broker_id: id,
                register_check_code: format!("{addr};1700000000000"),
            },
        );
        assert_eq!(call(&client, &first_leader, apply).await.code, response_code::SUCCESS);
        let reg = RemotingCommand::request(request_code::CONTROLLER_REGISTER_BROKER).with_header(
            &RegisterBrokerToControllerRequestHeader {
                cluster_name: "c1".into(),
                broker_name: "broker-a".into(),
                broker_id: id,
                broker_address: addr.clone(),
                invoke_time: None,
            },
        );
        let r = call(&client, &first_leader, reg).await;
        assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
        let h: RegisterBrokerToControllerResponseHeader = r.decode_header().unwrap();
        assert_eq!(h.master_broker_id, None);
        assert_eq!(call(&client, &first_leader, heartbeat(id, addr)).await.code, response_code::SUCCESS);
    }
    let elect =
        RemotingCommand::request(request_code::CONTROLLER_ELECT_MASTER).with_header(&ElectMasterRequestHeader {
            cluster_name: Some("c1".into()),
            broker_name: "broker-a".into(),
            broker_id: Some(1),
            designate_elect: Some(false),
            invoke_time: None,
        });
    let r = call(&client, &first_leader, elect).await;
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    let h: ElectMasterResponseHeader = r.decode_header().unwrap();
    assert_eq!((h.master_broker_id, h.master_epoch), (Some(1), Some(1)));
    assert!(String::from_utf8_lossy(&r.body).contains("\"brokerAddrs\""));

    // The master adds broker 2 to its SyncStateSet.
    let alter = RemotingCommand::request(request_code::CONTROLLER_ALTER_SYNC_STATE_SET)
        .with_header(&AlterSyncStateSetRequestHeader {
            broker_name: "broker-a".into(),
            master_broker_id: 1,
            master_epoch: 1,
            invoke_time: None,
        })
        .with_body(r#"{"syncStateSet":[1,2],"syncStateSetEpoch":1}"#);
    let r = call(&client, &first_leader, alter).await;
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    let h: AlterSyncStateSetResponseHeader = r.decode_header().unwrap();
    assert_eq!(h.new_sync_state_set_epoch, Some(2));

    // SIGKILL the leader: the other two elect a new one that holds the same metadata.
    let killed = nodes.iter().position(|n| n.addr() == first_leader).unwrap();
    nodes[killed].kill();
    let alive: Vec<&Node> = nodes.iter().filter(|n| n.process.is_some()).collect();
    let second_leader = leader(&client, &alive, Some(&first_leader)).await;
    assert_ne!(second_leader, first_leader);
    let info = RemotingCommand::request(request_code::CONTROLLER_GET_REPLICA_INFO)
        .with_header(&GetReplicaInfoRequestHeader { broker_name: "broker-a".into() });
    let r = call(&client, &second_leader, info.clone()).await;
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    let h: GetReplicaInfoResponseHeader = r.decode_header().unwrap();
    assert_eq!((h.master_broker_id, h.master_epoch), (Some(1), Some(1)));
    assert_eq!(String::from_utf8_lossy(&r.body), r#"{"syncStateSet":[1,2],"syncStateSetEpoch":2}"#);

    // Only broker 2 keeps sending heartbeats (to the new leader): after one heartbeat timeout
    // the controller replaces master 1 by broker 2 and tells broker 2.
    let hb_client = Arc::new(RemotingClient::new(ClientConfig::default()));
    let hb = hb_client.clone();
    let (hb_leader, b2) = (second_leader.clone(), broker2_addr.clone());
    let beats = tokio::spawn(async move {
        loop {
            // A long timeout: only the closed connection (below) can make broker 2 dead soon.
            let _ = hb.invoke(&hb_leader, heartbeat_for(2, &b2, 60_000), T).await;
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    });
    // (Broker 2 was also told of the first election, master 1 in epoch 1.)
    let notice = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let n = notified.recv().await.unwrap();
            if n.master_epoch != Some(1) {
                return n;
            }
        }
    })
    .await
    .expect("NOTIFY_BROKER_ROLE_CHANGED of a new master within 20 s");
    assert_eq!((notice.master_broker_id, notice.master_epoch), (Some(2), Some(2)));
    assert_eq!(notice.master_address.as_deref(), Some(broker2_addr.as_str()));
    let h: GetReplicaInfoResponseHeader = call(&client, &second_leader, info.clone()).await.decode_header().unwrap();
    assert_eq!((h.master_broker_id, h.master_epoch), (Some(2), Some(2)));

    // mqadmin's controller commands, against any node.
    let any = nodes.iter().find(|n| n.process.is_some() && n.addr() != second_leader).unwrap().addr();
    let out = admin(&["getControllerMetaData", "-a", &any]);
    assert!(
        out.contains(&format!("#ControllerLeaderAddress\t{second_leader}")) && out.matches("#Peer:").count() == 3,
        "{out}"
    );
    let out = admin(&["getSyncStateSet", "-a", &any, "-b", "broker-a"]);
    assert!(out.contains("#MasterBrokerId\t2") && out.contains("#MasterEpoch\t2"), "{out}");
    assert!(out.contains("InSyncReplica:\tReplicaIdentity{brokerName='broker-a', brokerId=2"), "{out}");
    let out = admin(&["electMaster", "-a", &any, "-c", "c1", "-bn", "broker-a", "-b", "2"]);
    assert!(out.contains("already") && out.contains("#brokerMasterId\t2"), "{out}");
    let err = admin_fails(&["electMaster", "-a", &any, "-c", "c1", "-bn", "broker-a", "-b", "1"]);
    assert!(err.contains("CONTROLLER_ELECT_MASTER_FAILED"), "{err}");
    let err = admin_fails(&["cleanBrokerMetadata", "-a", &any, "-bn", "broker-a", "-b", "2"]);
    assert!(err.contains("CONTROLLER_INVALID_CLEAN_BROKER_METADATA"), "broker 2 is alive: {err}");
    let out = admin(&["cleanBrokerMetadata", "-a", &any, "-bn", "broker-a", "-b", "1"]);
    assert!(out.contains("success"), "{out}");
    let out = admin(&["getSyncStateSet", "-a", &any, "-b", "broker-a", "--json"]);
    assert!(!out.contains("\"brokerId\": 1,") && out.contains("\"brokerId\": 2,"), "{out}");
    let out = admin(&["getControllerConfig", "-a", &any]);
    assert!(out.contains("controllerDLegerGroup") && out.contains("g1"), "{out}");
    admin(&["updateControllerConfig", "-a", &any, "-k", "enableElectUncleanMaster", "-v", "true"]);
    let out = admin(&["getControllerConfig", "-a", &any]);
    assert!(out.lines().any(|l| l.contains("enableElectUncleanMaster") && l.trim_end().ends_with("true")), "{out}");
    let any_node = nodes.iter().find(|n| n.addr() == any).unwrap();
    let stored = std::fs::read_to_string(dir.path().join(format!("{}.properties", any_node.name))).unwrap();
    assert!(stored.contains("enableElectUncleanMaster=true"), "{stored}");
    let err = admin_fails(&["updateControllerConfig", "-a", &any, "-k", "configStorePath", "-v", "/tmp/x"]);
    assert!(err.contains("NO_PERMISSION"), "{err}");
    let err = admin_fails(&["updateControllerConfig", "-a", &any, "-k", "scanInactiveMasterInterval", "-v", "soon"]);
    assert!(err.contains("SYSTEM_ERROR"), "{err}");
    beats.abort();

    // Broker 2's connection closes: the leader counts it dead at once (its heartbeat timeout is
    // a minute), finds no replica to take over and records the set as masterless, fencing
    // epoch 2.
    hb_client.shutdown().await;
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let h: GetReplicaInfoResponseHeader =
            call(&client, &second_leader, info.clone()).await.decode_header().unwrap();
        if h.master_broker_id.is_none() {
            assert_eq!(h.master_epoch, Some(3));
            break;
        }
        assert!(Instant::now() < deadline, "master 2 still there 15 s after its connection closed: {h:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The killed node restarts from its store and follows the group again.
    nodes[killed].start();
    let all: Vec<&Node> = nodes.iter().collect();
    assert_eq!(leader(&client, &all, None).await, second_leader);
    let _ = stop.send(());
}

/// `enableControllerInNamesrv=true`: one process serves the name server on its port and a
/// one-node controller group on the controller's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_runs_inside_the_name_server() {
    let dir = tempfile::tempdir().unwrap();
    let (ns_port, ctl_port) = (free_port(), free_port());
    let conf = format!(
        "listenPort={ns_port}\nkvConfigPath={}\nenableControllerInNamesrv=true\ncontrollerDLegerGroup=g\n\
         controllerDLegerPeers=n0-127.0.0.1:{ctl_port}\ncontrollerDLegerSelfId=n0\ncontrollerStorePath={}\n",
        dir.path().join("kv.json").display(),
        dir.path().join("controller").display()
    );
    let _ns =
        spawn_listening(&["namesrv"], &dir.path().join("ns.conf"), &conf, &dir.path().join("ns.log"), ns_port).unwrap();
    let client = RemotingClient::new(ClientConfig::default());
    let ctl =
        Node { name: "n0".into(), port: ctl_port, conf_text: String::new(), dir: dir.path().to_owned(), process: None };
    assert_eq!(leader(&client, &[&ctl], None).await, format!("127.0.0.1:{ctl_port}"));
    let r = call(
        &client,
        &ctl.addr(),
        RemotingCommand::request(request_code::CONTROLLER_GET_NEXT_BROKER_ID)
            .with_header(&GetNextBrokerIdRequestHeader { cluster_name: "c".into(), broker_name: "b".into() }),
    )
    .await;
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    // The name server answers on its own port.
    let r =
        call(&client, &format!("127.0.0.1:{ns_port}"), RemotingCommand::request(request_code::GET_BROKER_CLUSTER_INFO))
            .await;
    assert_eq!(r.code, response_code::SUCCESS);
    // Its printed config shows both sets of keys.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ferromq"))
        .args(["namesrv", "-p", "-c"])
        .arg(dir.path().join("ns.conf"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("enableControllerInNamesrv=true") && text.contains("controllerDLegerSelfId=n0"), "{text}");
    assert!(!String::from_utf8_lossy(&out.stderr).contains("unknown"), "{}", String::from_utf8_lossy(&out.stderr));
}
