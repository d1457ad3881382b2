//! SYNC_MASTER replica waits: no slave means SLAVE_NOT_AVAILABLE at once, an acknowledgement
//! releases every put it covers together, a stalled slave means FLUSH_SLAVE_TIMEOUT, and the
//! needed acknowledgements follow `inSyncReplicas` / `enableAutoInSyncReplicas`.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use ferromq_replication::{HaConfig, ReplicaWaitError};
use ferromq_store::FlushDiskType;
use ferromq_testkit::Relay;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledgements_release_waiters_stalls_time_out_and_no_slave_is_not_available() {
    let (mdir, sdir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (master, ha) = start_master(mdir.path(), ha_config()).await;
    let ha = Arc::new(ha);
    let end = put_range(&master, 0, 10).await;

    // No slave: not available, without waiting.
    let began = Instant::now();
    assert_eq!(
        ha.wait_for_replicas(end, 2, Duration::from_secs(5)).await,
        Err(ReplicaWaitError::NotAvailable { in_sync: 1, needed: 2 })
    );
    assert!(began.elapsed() < Duration::from_secs(1));
    assert!(!ha.is_slave_ok(end));
    // The master alone is one acknowledgement.
    assert_eq!(ha.wait_for_replicas(end, 1, Duration::from_secs(5)).await, Ok(()));

    // A slave behind a relay.
    let relay = Relay::start(ha.local_addr()).await;
    let slave = open_store(sdir.path(), FlushDiskType::AsyncFlush);
    let client = start_slave(&slave, relay.addr(), ha_config());
    wait_shipping(&ha).await;
    let end = put_range(&master, 10, 20).await;
    assert_eq!(ha.wait_for_replicas(end, 2, Duration::from_secs(5)).await, Ok(()));
    assert!(ha.is_slave_ok(end));
    assert_eq!(ha.in_sync_replicas(end), 2);
    // Two slaves cannot be had from one.
    assert_eq!(
        ha.wait_for_replicas(end, 3, Duration::from_secs(5)).await,
        Err(ReplicaWaitError::NotAvailable { in_sync: 2, needed: 3 })
    );

    // A stalled link: the slave stays connected (and in sync by the gap rule) but cannot
    // acknowledge, so the wait times out.
    relay.stall();
    let end = put_range(&master, 20, 21).await;
    assert!(ha.is_slave_ok(end));
    let began = Instant::now();
    let timed_out = ha.wait_for_replicas(end, 2, Duration::from_millis(300)).await;
    assert!(
        matches!(timed_out, Err(ReplicaWaitError::Timeout { next_offset, acked: 1, needed: 2 }) if next_offset == end)
    );
    assert!(began.elapsed() >= Duration::from_millis(300));

    // Many puts wait while the link is stalled; the acknowledgement after it resumes releases
    // them together.
    let mut waiters = Vec::new();
    for n in 21..121 {
        let end = put_range(&master, n, n + 1).await;
        let ha = ha.clone();
        waiters.push(tokio::spawn(async move { ha.wait_for_replicas(end, 2, Duration::from_secs(20)).await }));
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(waiters.iter().all(|w| !w.is_finished()), "nothing is acknowledged while stalled");
    relay.resume();
    let released = Instant::now();
    for w in waiters {
        assert_eq!(w.await.unwrap(), Ok(()));
    }
    assert!(released.elapsed() < Duration::from_secs(2), "released promptly: {:?}", released.elapsed());
    wait_caught_up(&master, &slave).await;
    assert_commit_logs_identical(&master, &slave);

    // Shutting the service down fails a waiting put instead of leaving it hanging.
    relay.stall();
    let end = put_range(&master, 121, 122).await;
    let waiter = {
        let ha = ha.clone();
        tokio::spawn(async move { ha.wait_for_replicas(end, 2, Duration::from_secs(20)).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    ha.shutdown().await;
    assert_eq!(waiter.await.unwrap(), Err(ReplicaWaitError::ShutDown));
    client.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn needed_acknowledgements_follow_in_sync_replicas_and_the_automatic_adjustment() {
    let (mdir, sdir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let config =
        HaConfig { in_sync_replicas: 3, min_in_sync_replicas: 2, enable_auto_in_sync_replicas: true, ..ha_config() };
    let (master, ha) = start_master(mdir.path(), config.clone()).await;
    let end = put_range(&master, 0, 5).await;
    // Only the master is in sync: fewer than minInSyncReplicas.
    assert_eq!(ha.needed_acks(end), Err(ReplicaWaitError::NotEnoughInSync { in_sync: 1, needed: 2 }));
    assert_eq!(ha.replicate(end).await, Err(ReplicaWaitError::NotEnoughInSync { in_sync: 1, needed: 2 }));

    let slave = open_store(sdir.path(), FlushDiskType::AsyncFlush);
    let client = start_slave(&slave, ha.local_addr(), config);
    wait_shipping(&ha).await;
    let end = put_range(&master, 5, 10).await;
    // inSyncReplicas 3 shrinks to the two in sync.
    assert_eq!(ha.needed_acks(end), Ok(2));
    assert_eq!(ha.replicate(end).await, Ok(()));

    // Without the adjustment, inSyncReplicas is taken as it is; 1 never waits.
    let (mdir2, _keep) = (tempfile::tempdir().unwrap(), ());
    let (master2, plain) = start_master(mdir2.path(), HaConfig { in_sync_replicas: 1, ..ha_config() }).await;
    let end2 = put_range(&master2, 0, 1).await;
    assert_eq!(plain.needed_acks(end2), Ok(1));
    assert_eq!(plain.replicate(end2).await, Ok(()));
    client.shutdown().await;
    ha.shutdown().await;
    plain.shutdown().await;
}
