//! AutoSwitchHA (controller mode) in process on 127.0.0.1 with real stores: a new replica
//! follows its master and records the master's epochs; the confirm offset and SYNC_MASTER
//! waits follow the SyncStateSet; a replica joins the SyncStateSet once caught up; an old
//! master that wrote past the new master's history truncates to the consistent point and then
//! holds the new master's CommitLog byte for byte.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use ferromq_replication::autoswitch::{AutoSwitchMaster, AutoSwitchSlave, SharedEpochs, SyncStateSet};
use ferromq_replication::epoch_file::{EpochEntry, EpochFile};
use ferromq_replication::{HaConfig, ReplicaWaitError};
use ferromq_store::{FlushDiskType, MessageStore};
use tokio::net::TcpListener;

fn epochs_at(root: &Path) -> SharedEpochs {
    Arc::new(Mutex::new(EpochFile::load(&root.join("epochFileCheckpoint")).unwrap()))
}

fn entries(epochs: &SharedEpochs) -> Vec<(i32, i64)> {
    epochs.lock().unwrap().entries().iter().map(|e| (e.epoch, e.start_offset)).collect()
}

fn set(members: &[i64], epoch: i32) -> SyncStateSet {
    SyncStateSet { members: members.iter().copied().collect(), epoch }
}

async fn master(
    store: &Arc<MessageStore>,
    config: HaConfig,
    id: i64,
    epoch: i32,
    sync_state: SyncStateSet,
    epochs: &SharedEpochs,
) -> AutoSwitchMaster {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    AutoSwitchMaster::start(store.clone(), config, id, epoch, sync_state, epochs.clone(), listener).unwrap()
}

fn slave(
    store: &Arc<MessageStore>,
    config: HaConfig,
    id: i64,
    epochs: &SharedEpochs,
    master: &AutoSwitchMaster,
) -> AutoSwitchSlave {
    AutoSwitchSlave::start(
        store.clone(),
        config,
        client_options(),
        id,
        epochs.clone(),
        Some(master.local_addr().to_string()),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_replica_follows_joins_the_sync_state_set_and_confirms_writes() {
    let (mdir, sdir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let config = HaConfig { all_ack_in_sync_state_set: true, ..ha_config() };
    let (mstore, sstore) =
        (open_store(mdir.path(), FlushDiskType::AsyncFlush), open_store(sdir.path(), FlushDiskType::AsyncFlush));
    let (mepochs, sepochs) = (epochs_at(mdir.path()), epochs_at(sdir.path()));
    put_range(&mstore, 0, 200).await;
    let ha = master(&mstore, config.clone(), 1, 1, set(&[1], 1), &mepochs).await;
    assert_eq!(entries(&mepochs), vec![(1, 0)], "the first epoch covers what the store held");
    let replica = slave(&sstore, config.clone(), 2, &sepochs, &ha);

    wait_caught_up(&mstore, &sstore).await;
    assert!(assert_commit_logs_identical(&mstore, &sstore) >= 2);
    assert_consume_queues_equal(&mstore, &sstore);
    assert_eq!(entries(&sepochs), vec![(1, 0)], "the replica recorded the master's epoch");
    // Alone in its SyncStateSet the master waits for nobody.
    assert_eq!(ha.replicate(mstore.max_phy_offset()).await, Ok(()));

    // Caught up, the replica is wanted in the SyncStateSet; the controller agrees.
    wait_until("the replica is wanted", Duration::from_secs(10), || ha.wanted_sync_state_set().is_some()).await;
    assert_eq!(ha.wanted_sync_state_set(), Some(BTreeSet::from([1, 2])));
    ha.set_sync_state_set(set(&[1, 2], 2));
    assert_eq!(ha.wanted_sync_state_set(), None);

    // Now every put waits for the replica, and dispatch stops at what both hold.
    let end = put_range(&mstore, 200, 260).await;
    assert_eq!(ha.replicate(end).await, Ok(()));
    wait_until("the confirm offset reaches the end", Duration::from_secs(10), || ha.confirm_offset() == end).await;
    wait_until("the replica confirms the end", Duration::from_secs(10), || sstore.confirm_offset() == end).await;
    assert!(sstore.wait_dispatched(Duration::from_secs(10)));
    assert_consume_queues_equal(&mstore, &sstore);

    // Without the replica nothing new is confirmed: the put times out, dispatch holds.
    replica.shutdown().await;
    wait_until("the replica is gone", Duration::from_secs(10), || ha.connection_count() == 0).await;
    let cut_off = put_range(&mstore, 260, 270).await;
    let waited = ha.replicate(cut_off).await;
    assert!(matches!(waited, Err(ReplicaWaitError::Timeout { needed: 2, acked: 1, .. })), "{waited:?}");
    assert_eq!(ha.confirm_offset(), end);
    assert_eq!(mstore.dispatched_phy_offset(), end, "unconfirmed records stay invisible");
    assert_eq!(ha.wanted_sync_state_set(), Some(BTreeSet::from([1])), "a disconnected member leaves");
    ha.set_sync_state_set(set(&[1], 3));
    assert!(mstore.wait_dispatched(Duration::from_secs(10)), "alone again, everything is dispatched");
    assert_eq!(mstore.dispatched_phy_offset(), cut_off);
    ha.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_master_truncates_what_it_wrote_past_the_new_masters_history() {
    let (adir, bdir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let config = ha_config();
    let (a, b) =
        (open_store(adir.path(), FlushDiskType::AsyncFlush), open_store(bdir.path(), FlushDiskType::AsyncFlush));
    let (aepochs, bepochs) = (epochs_at(adir.path()), epochs_at(bdir.path()));

    // Epoch 1: A is master, B replicates it.
    let ha = master(&a, config.clone(), 1, 1, set(&[1, 2], 1), &aepochs).await;
    let replica = slave(&b, config.clone(), 2, &bepochs, &ha);
    let shared_end = put_range(&a, 0, 150).await;
    wait_caught_up(&a, &b).await;
    replica.shutdown().await;
    ha.shutdown().await;

    // A partition: B is made master of epoch 2 and writes alone; then the controller, having
    // lost B, makes A master of epoch 3, and A writes other messages.
    let hb = master(&b, config.clone(), 2, 2, set(&[2], 1), &bepochs).await;
    put_range(&b, 1000, 1080).await;
    hb.shutdown().await;
    assert_eq!(entries(&bepochs), vec![(1, 0), (2, shared_end)]);
    let ha = master(&a, config.clone(), 1, 3, set(&[1], 2), &aepochs).await;
    put_range(&a, 2000, 2150).await;
    assert_eq!(entries(&aepochs), vec![(1, 0), (3, shared_end)]);
    assert!(b.max_phy_offset() > shared_end);

    // B comes back as A's replica: it cuts epoch 2 away and takes epoch 3 from A.
    let replica = slave(&b, config.clone(), 2, &bepochs, &ha);
    wait_caught_up(&a, &b).await;
    assert!(assert_commit_logs_identical(&a, &b) >= 2, "byte-identical after the cut");
    assert_consume_queues_equal(&a, &b);
    assert_eq!(entries(&bepochs), vec![(1, 0), (3, shared_end)]);
    let found = b.query_message(TOPIC, "k1010", 4, 0, i64::MAX);
    assert!(found.messages.iter().all(|m| !String::from_utf8_lossy(m).contains("1010:")), "epoch 2 data is gone");
    replica.shutdown().await;
    ha.shutdown().await;

    // A replica whose epochs share nothing with the master's is not touched.
    let cdir = tempfile::tempdir().unwrap();
    let c = open_store(cdir.path(), FlushDiskType::AsyncFlush);
    let cepochs = epochs_at(cdir.path());
    put_range(&c, 0, 20).await;
    cepochs.lock().unwrap().append(7, 0).unwrap();
    let c_end = c.max_phy_offset();
    let ha = master(&a, config.clone(), 1, 4, set(&[1], 3), &aepochs).await;
    let stranger = slave(&c, config, 3, &cepochs, &ha);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!stranger.is_connected());
    assert_eq!(c.max_phy_offset(), c_end, "no shared epoch: nothing truncated, nothing appended");
    assert_eq!(cepochs.lock().unwrap().entries(), &[EpochEntry { epoch: 7, start_offset: 0 }]);
    stranger.shutdown().await;
    ha.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_async_learner_replicates_but_never_joins_the_sync_state_set() {
    let (mdir, sdir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (mstore, sstore) =
        (open_store(mdir.path(), FlushDiskType::AsyncFlush), open_store(sdir.path(), FlushDiskType::AsyncFlush));
    let (mepochs, sepochs) = (epochs_at(mdir.path()), epochs_at(sdir.path()));
    let ha = master(&mstore, ha_config(), 1, 5, set(&[1], 1), &mepochs).await;
    put_range(&mstore, 0, 50).await;
    let learner = HaConfig { async_learner: true, ..ha_config() };
    let replica = slave(&sstore, learner, 4, &sepochs, &ha);
    wait_caught_up(&mstore, &sstore).await;
    assert_eq!(entries(&sepochs), vec![(5, 0)]);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(ha.wanted_sync_state_set(), None, "a learner is never proposed");
    assert_eq!(ha.runtime_info().in_sync_slave_nums, 0);
    replica.shutdown().await;
    ha.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_being_added_counts_for_acknowledgements_until_the_controller_answers() {
    let dir = tempfile::tempdir().unwrap();
    let config = HaConfig { all_ack_in_sync_state_set: true, slave_timeout_ms: 300, ..ha_config() };
    let store = open_store(dir.path(), FlushDiskType::AsyncFlush);
    let epochs = epochs_at(dir.path());
    let ha = master(&store, config, 1, 1, set(&[1], 1), &epochs).await;
    let end = put_range(&store, 0, 5).await;
    assert_eq!(ha.replicate(end).await, Ok(()), "alone, nobody is waited for");
    // Replica 2 is proposed: the controller may add it and elect it before answering, so a put
    // is not acknowledged without it.
    ha.propose(&BTreeSet::from([1, 2]));
    let end = put_range(&store, 5, 10).await;
    assert!(matches!(ha.replicate(end).await, Err(ReplicaWaitError::Timeout { needed: 2, .. })));
    // The controller's view (unchanged set, same epoch) settles it.
    ha.set_sync_state_set(set(&[1], 1));
    assert_eq!(ha.replicate(end).await, Ok(()));
    ha.shutdown().await;
}

/// A broker in controller mode starts a replication service at every role change: the CommitLog
/// listener of a stopped one is dropped at the next advance instead of piling up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopped_masters_leave_no_commit_log_listener_behind() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(dir.path(), FlushDiskType::AsyncFlush);
    let epochs = epochs_at(dir.path());
    let before = store.commit_log_listener_count();
    for epoch in 1..=3 {
        let ha = master(&store, ha_config(), 1, epoch, set(&[1], epoch), &epochs).await;
        ha.shutdown().await;
        drop(ha);
        put_range(&store, (epoch as u64) * 10, (epoch as u64) * 10 + 5).await;
    }
    let ha = master(&store, ha_config(), 1, 4, set(&[1], 4), &epochs).await;
    put_range(&store, 100, 105).await;
    wait_until("stopped masters' listeners are dropped", Duration::from_secs(10), || {
        store.commit_log_listener_count() == before + 1
    })
    .await;
    ha.shutdown().await;
}
