//! Network faults between slave and master through an in-test TCP relay: the link is cut and
//! stalled (longer than the housekeeping interval) while the master writes; the slave
//! reconnects and catches up, and its CommitLog is the master's byte for byte, nothing
//! duplicated or corrupted.

mod common;

use std::time::Duration;

use common::*;
use ferromq_replication::HaConfig;
use ferromq_store::FlushDiskType;
use ferromq_testkit::Relay;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slave_reconnects_after_cuts_and_stalls_and_ends_identical() {
    common::log::install();
    let (mdir, sdir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // Small frames so a cut often lands inside a record; a short housekeeping interval so a
    // stall is noticed within the test.
    let config = HaConfig {
        ha_transfer_batch_size: 3000,
        ha_send_heartbeat_interval_ms: 100,
        ha_housekeeping_interval_ms: 600,
        ..HaConfig::default()
    };
    let (master, ha) = start_master(mdir.path(), config.clone()).await;
    let relay = Relay::start(ha.local_addr()).await;
    let slave = open_store(sdir.path(), FlushDiskType::AsyncFlush);
    let client = start_slave(&slave, relay.addr(), config);
    wait_shipping(&ha).await;

    let writer = {
        let master = master.clone();
        tokio::spawn(async move {
            for chunk in 0..40u64 {
                put_range(&master, chunk * 25, chunk * 25 + 25).await;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    for round in 0..3 {
        wait_until("the slave makes progress", Duration::from_secs(20), || {
            slave.max_phy_offset() > (round + 1) * SEGMENT_BYTES as i64 / 2
        })
        .await;
        let links = relay.accepted();
        relay.cut();
        wait_until("the slave reconnects after a cut", Duration::from_secs(10), || relay.accepted() > links).await;
        // A stall longer than haHousekeepingInterval: both sides give the link up.
        let links = relay.accepted();
        relay.stall();
        tokio::time::sleep(Duration::from_millis(900)).await;
        relay.resume();
        wait_until("the slave reconnects after a stall", Duration::from_secs(10), || relay.accepted() > links).await;
    }
    writer.await.unwrap();
    wait_caught_up(&master, &slave).await;
    assert!(relay.accepted() >= 6, "the slave reconnected after every fault ({} links)", relay.accepted());
    assert!(assert_commit_logs_identical(&master, &slave) >= 5);
    assert_consume_queues_equal(&master, &slave);
    // Every message once, in order, on the slave.
    for q in 0..QUEUES {
        let mut offset = slave.min_offset_in_queue(TOPIC, q);
        let mut expected = q as u64;
        while offset < slave.max_offset_in_queue(TOPIC, q) {
            let r = slave.get_message(TOPIC, q, offset, 32, 1 << 20, None);
            for m in &r.messages {
                let body = ferromq_protocol::message::StoredMessage::decode(m).unwrap().0.body;
                let n: u64 = std::str::from_utf8(&body).unwrap().split(':').next().unwrap().parse().unwrap();
                assert_eq!(n, expected, "queue {q} holds each message once, in order");
                expected += QUEUES as u64;
            }
            offset = r.next_begin_offset;
        }
        assert_eq!(expected, 1000 + q as u64);
    }
    client.shutdown().await;
    ha.shutdown().await;
}
