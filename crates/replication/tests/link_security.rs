//! The HA port's TLS and FerroMQ's HA authentication (the `link` module), with real stores on
//! 127.0.0.1: a replica with the right credentials follows its master (classic and
//! AutoSwitchHA, over TLS too); wrong credentials, no credentials and Java's bare offset report
//! get nothing from a master that requires authentication; a master that does not require it
//! serves both kinds of replica; an enforcing master closes plaintext.

mod common;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use ferromq_protocol::signature::{hmac_sha1, SessionCredentials};
use ferromq_remoting::tls::{ClientTls, ServerTls, TlsConfig};
use ferromq_replication::autoswitch::{AutoSwitchMaster, AutoSwitchSlave, SyncStateSet};
use ferromq_replication::epoch_file::EpochFile;
use ferromq_replication::{HaClient, HaClientOptions, HaListener, HaService, ReplicaAuthenticator, AUTH_MAGIC};
use ferromq_store::FlushDiskType;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const T: Duration = Duration::from_secs(10);

#[derive(Debug)]
struct Accounts(HashMap<String, String>);

impl ReplicaAuthenticator for Accounts {
    fn secret(&self, access_key: &str) -> Option<String> {
        self.0.get(access_key).cloned()
    }
}

fn accounts() -> Arc<dyn ReplicaAuthenticator> {
    Arc::new(Accounts(HashMap::from([("replicator".to_owned(), "replicator-secret".to_owned())])))
}

fn options(credentials: Option<(&str, &str)>, tls: bool) -> HaClientOptions {
    HaClientOptions {
        credentials: credentials.map(|(ak, sk)| SessionCredentials::new(ak, sk)),
        tls: tls.then(ClientTls::default),
        ..client_options()
    }
}

fn server_tls(mode: &str) -> ServerTls {
    TlsConfig::load([("tls.server.mode", mode)]).unwrap().server_tls("HA test (self-signed)").unwrap()
}

async fn master_with(
    listener: impl FnOnce(TcpListener) -> HaListener,
) -> (tempfile::TempDir, Arc<ferromq_store::MessageStore>, HaService) {
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(dir.path(), FlushDiskType::AsyncFlush);
    put_range(&store, 0, 300).await;
    let bound = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let ha = HaService::start(store.clone(), ha_config(), listener(bound)).unwrap();
    (dir, store, ha)
}

fn follow(
    master: SocketAddr,
    options: HaClientOptions,
) -> (tempfile::TempDir, Arc<ferromq_store::MessageStore>, HaClient) {
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(dir.path(), FlushDiskType::AsyncFlush);
    let client = HaClient::start_with(store.clone(), ha_config(), options);
    client.update_master_address(&master.to_string());
    (dir, store, client)
}

/// Reads until `n` bytes or the end; returns what came.
async fn read_some(stream: &mut TcpStream, n: usize) -> Vec<u8> {
    let mut out = vec![0u8; n];
    let mut got = 0;
    while got < n {
        match tokio::time::timeout(T, stream.read(&mut out[got..])).await.expect("the master answers or closes") {
            Ok(0) | Err(_) => break,
            Ok(k) => got += k,
        }
    }
    out.truncate(got);
    out
}

/// The exchange by hand: the master's status byte for `access_key` signing with `secret`.
async fn raw_exchange(addr: SocketAddr, access_key: &str, secret: &str) -> (Vec<u8>, Vec<u8>) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(&AUTH_MAGIC).await.unwrap();
    let hello = read_some(&mut s, 28).await;
    assert_eq!(hello.len(), 28, "magic and challenge");
    assert_eq!(hello[..8], AUTH_MAGIC);
    let mut signed = hello[8..].to_vec();
    signed.extend_from_slice(access_key.as_bytes());
    let mut answer = (access_key.len() as u16).to_be_bytes().to_vec();
    answer.extend_from_slice(access_key.as_bytes());
    answer.extend_from_slice(&hmac_sha1(secret.as_bytes(), &signed));
    s.write_all(&answer).await.unwrap();
    let status = read_some(&mut s, 1).await;
    // After a refusal the master closes; after an acceptance a report gets data.
    s.write_all(&0i64.to_be_bytes()).await.unwrap();
    let after = read_some(&mut s, 12).await;
    (status, after)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_replicas_that_authenticate_get_data() {
    let (_m, mstore, ha) = master_with(|l| HaListener::from(l).with_authenticator(accounts())).await;
    let addr = ha.local_addr();

    // The right account follows.
    let (_s, sstore, client) = follow(addr, options(Some(("replicator", "replicator-secret")), false));
    wait_caught_up(&mstore, &sstore).await;
    assert!(assert_commit_logs_identical(&mstore, &sstore) >= 1);

    // A wrong secret and an unknown account: status 1, then the connection closes.
    for (ak, sk) in [("replicator", "guess"), ("eve", "replicator-secret")] {
        let (status, after) = raw_exchange(addr, ak, sk).await;
        assert_eq!(status, vec![1], "{ak}/{sk} was not refused");
        assert!(after.is_empty(), "{ak}/{sk} got data: {after:?}");
    }
    // The right one by hand: status 0, then a transfer header for offset 0.
    let (status, after) = raw_exchange(addr, "replicator", "replicator-secret").await;
    assert_eq!(status, vec![0]);
    assert_eq!(after.len(), 12, "a frame header follows the report");
    // An empty replica starts at the master's last segment.
    assert_eq!(i64::from_be_bytes(after[..8].try_into().unwrap()) % SEGMENT_BYTES as i64, 0);

    // Java's opening (a bare offset report) is closed unanswered.
    let mut java = TcpStream::connect(addr).await.unwrap();
    java.write_all(&0i64.to_be_bytes()).await.unwrap();
    assert!(read_some(&mut java, 12).await.is_empty(), "an unauthenticated report got data");

    // A slave with a wrong secret never holds a byte, while the master keeps serving the right one.
    let (_w, wrong_store, wrong) = follow(addr, options(Some(("replicator", "nope")), false));
    put_range(&mstore, 300, 320).await;
    wait_caught_up(&mstore, &sstore).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(wrong_store.max_phy_offset(), 0, "a refused slave received data");
    assert_eq!(ha.connection_count(), 1, "only the authenticated slave is connected");
    wrong.shutdown().await;
    client.shutdown().await;
    ha.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_that_does_not_require_it_serves_both_kinds_of_replica() {
    let (_m, mstore, ha) = master_with(HaListener::from).await;
    let addr = ha.local_addr();
    let (_a, astore, a) = follow(addr, options(Some(("anyone", "anything")), false));
    let (_b, bstore, b) = follow(addr, options(None, false));
    wait_caught_up(&mstore, &astore).await;
    wait_caught_up(&mstore, &bstore).await;
    assert!(assert_commit_logs_identical(&mstore, &astore) >= 1);
    assert!(assert_commit_logs_identical(&mstore, &bstore) >= 1);
    a.shutdown().await;
    b.shutdown().await;
    ha.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_enforcing_serves_tls_replicas_and_closes_plaintext() {
    let (_m, mstore, ha) =
        master_with(|l| HaListener::from(l).with_tls(server_tls("enforcing")).with_authenticator(accounts())).await;
    let addr = ha.local_addr();
    let (_s, sstore, client) = follow(addr, options(Some(("replicator", "replicator-secret")), true));
    wait_caught_up(&mstore, &sstore).await;
    assert!(assert_commit_logs_identical(&mstore, &sstore) >= 1);

    // Plaintext, even with the exchange, is closed before a byte is answered.
    let mut plain = TcpStream::connect(addr).await.unwrap();
    plain.write_all(&AUTH_MAGIC).await.unwrap();
    assert!(read_some(&mut plain, 28).await.is_empty(), "an enforcing HA port answered plaintext");
    let (_p, pstore, p) = follow(addr, options(Some(("replicator", "replicator-secret")), false));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(pstore.max_phy_offset(), 0, "a plaintext slave received data");
    p.shutdown().await;
    client.shutdown().await;
    ha.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn autoswitch_replicas_authenticate_over_tls_too() {
    let (mdir, sdir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mstore = open_store(mdir.path(), FlushDiskType::AsyncFlush);
    let sstore = open_store(sdir.path(), FlushDiskType::AsyncFlush);
    let epochs = |d: &std::path::Path| Arc::new(Mutex::new(EpochFile::load(&d.join("epochFileCheckpoint")).unwrap()));
    put_range(&mstore, 0, 200).await;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let set = SyncStateSet { members: [1].into_iter().collect(), epoch: 1 };
    let listener = HaListener::from(listener).with_tls(server_tls("permissive")).with_authenticator(accounts());
    let ha = AutoSwitchMaster::start(mstore.clone(), ha_config(), 1, 1, set, epochs(mdir.path()), listener).unwrap();
    let master = Some(ha.local_addr().to_string());

    let refused_dir = tempfile::tempdir().unwrap();
    let refused_store = open_store(refused_dir.path(), FlushDiskType::AsyncFlush);
    let refused = AutoSwitchSlave::start(
        refused_store.clone(),
        ha_config(),
        options(None, true),
        3,
        epochs(refused_dir.path()),
        master.clone(),
    );
    let replica = AutoSwitchSlave::start(
        sstore.clone(),
        ha_config(),
        options(Some(("replicator", "replicator-secret")), true),
        2,
        epochs(sdir.path()),
        master,
    );
    wait_caught_up(&mstore, &sstore).await;
    assert!(assert_commit_logs_identical(&mstore, &sstore) >= 1);
    assert_eq!(refused_store.max_phy_offset(), 0, "a replica without credentials received data");
    assert_eq!(ha.connection_count(), 1);
    refused.shutdown().await;
    replica.shutdown().await;
    ha.shutdown().await;
}
