//! A controller-mode broker's link to the controller (`ReplicasManager`) against a real
//! controller node on 127.0.0.1: ids taken and kept on disk, the first election, a slave, the
//! master's SyncStateSet, the master's death and the slave taking over, the old master coming
//! back as a slave of the new one, stale role changes ignored.

use std::path::Path;
use std::time::Duration;

use ferromq_broker::replicas_manager::{ControllerModeConfig, ControllerModeError, LocalState, ReplicasManager, Role};
use ferromq_controller::ControllerConfig;
use ferromq_protocol::header::NotifyBrokerRoleChangedRequestHeader;

fn config(controller: &str, dir: &Path, broker: &str, addr: &str) -> ControllerModeConfig {
    ControllerModeConfig {
        controller_addrs: vec![controller.to_owned()],
        cluster_name: "c1".into(),
        broker_name: broker.into(),
        broker_addr: addr.into(),
        identity_path: dir.join("brokerIdentity"),
        heartbeat_interval: Duration::from_millis(200),
        heartbeat_timeout: Duration::from_millis(1500),
        request_timeout: Duration::from_secs(3),
        sync_period: Duration::from_millis(200),
        election_priority: i32::MAX,
        client_tls: None,
    }
}

async fn start(cfg: ControllerModeConfig) -> std::sync::Arc<ReplicasManager> {
    // The controller elects itself leader within a few seconds of starting.
    for _ in 0..100 {
        match ReplicasManager::start(cfg.clone()).await {
            Ok(m) => return m,
            Err(ControllerModeError::NoLeader(_)) => tokio::time::sleep(Duration::from_millis(100)).await,
            Err(e) => panic!("{e}"),
        }
    }
    panic!("no controller leader within 10 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_roles_failover_and_fencing() {
    let dir = tempfile::tempdir().unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let controller = listener.local_addr().unwrap().to_string();
    let cc = ControllerConfig {
        peers: format!("n0-{controller}"),
        self_id: "n0".into(),
        store_path: dir.path().join("controller"),
        scan_inactive_master_interval_ms: 200,
        broker_heartbeat_timeout_ms: 1500,
        config_store_path: dir.path().join("controller.properties"),
        ..Default::default()
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(ferromq_controller::run(cc, listener, async move {
        let _ = stopped.await;
    }));

    let (dir_a, dir_b) = (dir.path().join("a"), dir.path().join("b"));
    let a = start(config(&controller, &dir_a, "broker-a", "127.0.0.1:10911")).await;
    let b = start(config(&controller, &dir_b, "broker-a", "127.0.0.1:10921")).await;
    assert_eq!((a.broker_id(), b.broker_id()), (1, 2));
    assert_eq!(std::fs::read_to_string(dir_a.join("brokerIdentity")).unwrap(), "c1#broker-a#1");
    assert!(!dir_a.join("brokerIdentity-temp").exists());

    // A broker offered an id another replica took first (both asked for the next id at once):
    // its apply is refused, the pending id forgotten, and the next attempt takes a new one.
    let dir_c = dir.path().join("c");
    std::fs::create_dir_all(&dir_c).unwrap();
    let stale = ferromq_replication::identity_file::PendingIdentity {
        identity: ferromq_replication::identity_file::BrokerIdentity {
            cluster_name: "c1".into(),
            broker_name: "broker-a".into(),
            broker_id: 2,
        },
        register_check_code: "127.0.0.1:10931;1".into(),
    };
    stale.store(&dir_c.join("brokerIdentity")).unwrap();
    let refused = ReplicasManager::start(config(&controller, &dir_c, "broker-a", "127.0.0.1:10931")).await;
    assert!(matches!(refused, Err(ControllerModeError::Refused { code: 2014, .. })), "{refused:?}");
    assert!(!dir_c.join("brokerIdentity-temp").exists(), "the taken id is forgotten");
    let c = start(config(&controller, &dir_c, "broker-a", "127.0.0.1:10931")).await;
    assert_eq!(c.broker_id(), 3);
    c.shutdown().await;

    let local = LocalState { epoch: 0, max_offset: 0, confirm_offset: 0 };
    a.heartbeat(local).await.unwrap();
    b.heartbeat(local).await.unwrap();
    let role_a = a.sync_role().await.unwrap();
    let Role::Master { epoch: 1, sync_state_set } = role_a else { panic!("{role_a:?}") };
    assert_eq!(sync_state_set.sync_state_set, [1].into());
    assert_eq!(
        b.sync_role().await.unwrap(),
        Role::Slave { master_id: 1, master_addr: "127.0.0.1:10911".into(), epoch: 1 }
    );

    // The master takes its slave into the SyncStateSet.
    let set = a.alter_sync_state_set([1, 2].into()).await.unwrap();
    assert_eq!((set.sync_state_set_epoch, set.sync_state_set.len()), (2, 2));
    assert!(b.alter_sync_state_set([2].into()).await.is_err(), "only the master alters the set");

    // Broker a goes silent (its manager stops); b keeps its heartbeats and role checks going
    // and becomes master in epoch 2.
    a.shutdown().await;
    drop(a);
    let (stop_b, b_stopped) = tokio::sync::oneshot::channel::<()>();
    let mut role_b = b.role();
    let runner = tokio::spawn(b.clone().run(move || local, async move {
        let _ = b_stopped.await;
    }));
    tokio::time::timeout(Duration::from_secs(20), role_b.wait_for(|r| matches!(r, Role::Master { epoch: 2, .. })))
        .await
        .expect("b becomes master within 20 s")
        .unwrap();

    // a comes back on its store: the same id, now a slave of b.
    let a = start(config(&controller, &dir_a, "broker-a", "127.0.0.1:10911")).await;
    assert_eq!(a.broker_id(), 1);
    a.heartbeat(local).await.unwrap();
    let slave = Role::Slave { master_id: 2, master_addr: "127.0.0.1:10921".into(), epoch: 2 };
    assert_eq!(a.sync_role().await.unwrap(), slave);
    // A stale notification (epoch 1, a as master) changes nothing.
    let stale = NotifyBrokerRoleChangedRequestHeader {
        master_address: Some("127.0.0.1:10911".into()),
        master_epoch: Some(1),
        sync_state_set_epoch: Some(1),
        master_broker_id: Some(1),
    };
    assert_eq!(a.on_role_changed(&stale, br#"{"syncStateSet":[1],"syncStateSetEpoch":1}"#), slave);

    // A store whose identity names another broker set is refused.
    let err = ReplicasManager::start(config(&controller, &dir_a, "broker-b", "127.0.0.1:10911")).await.unwrap_err();
    assert!(matches!(err, ControllerModeError::WrongSet { .. }), "{err}");

    let _ = stop_b.send(());
    runner.await.unwrap();
    a.shutdown().await;
    b.shutdown().await;
    let _ = stop.send(());
    server.await.unwrap().unwrap();
}
