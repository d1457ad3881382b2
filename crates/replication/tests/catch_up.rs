//! A master store with its HA service and a slave store with its HA client, in process on
//! 127.0.0.1: catch-up from empty and from behind, across several CommitLog segments, with
//! CommitLog files byte-for-byte identical and ConsumeQueues equal afterwards; a slave that
//! crashed mid-stream resumes from its recovered offset.

mod common;

use std::time::Duration;

use common::*;
use ferromq_replication::HaConfig;
use ferromq_store::{FlushDiskType, GetMessageStatus};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_slave_starts_at_the_masters_last_segment_and_follows_across_segments() {
    let (mdir, sdir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (master, ha) = start_master(mdir.path(), ha_config()).await;
    put_range(&master, 0, 150).await;
    let end = master.max_phy_offset();
    let last_segment = end - end % SEGMENT_BYTES as i64;
    assert!(last_segment > 0, "the master already filled a segment");

    let slave = open_store(sdir.path(), FlushDiskType::AsyncFlush);
    let client = start_slave(&slave, ha.local_addr(), ha_config());
    wait_shipping(&ha).await;
    put_range(&master, 150, 700).await;
    wait_caught_up(&master, &slave).await;

    assert_eq!(slave.min_phy_offset(), last_segment, "an empty slave starts at the master's newest segment");
    let files = assert_commit_logs_identical(&master, &slave);
    assert!(files >= 5, "the slave followed across segments ({files} files with data)");
    assert_consume_queues_equal(&master, &slave);
    // The slave's index was built too.
    let found = slave.query_message(TOPIC, "k650", 4, 0, i64::MAX);
    assert_eq!(found.messages.len(), 1, "the slave's index finds a replicated key");
    let info = ha.runtime_info();
    assert_eq!(info.ha_connection_info.len(), 1);
    assert_eq!(info.in_sync_slave_nums, 1);
    wait_until("the slave's acknowledgement reaches the end", Duration::from_secs(5), || {
        ha.push2_slave_max_offset() == master.max_phy_offset()
    })
    .await;
    assert_eq!(ha.runtime_info().ha_connection_info[0].diff, 0);
    let slave_info = client.runtime_info();
    assert!(!slave_info.master);
    assert_eq!(slave_info.ha_client_runtime_info.max_offset, master.max_phy_offset());
    assert_eq!(slave_info.ha_client_runtime_info.master_addr, Some(ha.local_addr().to_string()));

    client.shutdown().await;
    ha.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tiny_frames_cut_records_and_blank_markers_and_a_sync_flush_slave_reassembles_them() {
    let (mdir, sdir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // 777-byte frames cut nearly every record, and the 8-byte blank markers, in two.
    let config = HaConfig { ha_transfer_batch_size: 777, ..ha_config() };
    let (master, ha) = start_master(mdir.path(), config.clone()).await;
    let slave = open_store(sdir.path(), FlushDiskType::SyncFlush);
    let client = start_slave(&slave, ha.local_addr(), config);
    wait_shipping(&ha).await;
    put_range(&master, 0, 300).await;
    wait_caught_up(&master, &slave).await;
    assert_eq!(slave.min_phy_offset(), 0);
    assert!(assert_commit_logs_identical(&master, &slave) >= 3);
    assert_consume_queues_equal(&master, &slave);
    // A SYNC_FLUSH slave acknowledges only what is on its disk.
    wait_until("acknowledged", Duration::from_secs(5), || ha.push2_slave_max_offset() == master.max_phy_offset()).await;
    assert!(slave.flushed_phy_offset() >= ha.push2_slave_max_offset());
    // Messages read back from the slave are the master's.
    let r = slave.get_message(TOPIC, 1, 0, 8, 1 << 20, None);
    assert_eq!(r.status, GetMessageStatus::Found);
    let m = master.get_message(TOPIC, 1, 0, 8, 1 << 20, None);
    assert_eq!(r.messages, m.messages);
    client.shutdown().await;
    ha.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lagging_slave_catches_up_from_where_it_stopped() {
    let (mdir, sdir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (master, ha) = start_master(mdir.path(), ha_config()).await;
    let slave = open_store(sdir.path(), FlushDiskType::AsyncFlush);
    let client = start_slave(&slave, ha.local_addr(), ha_config());
    wait_shipping(&ha).await;
    put_range(&master, 0, 100).await;
    wait_caught_up(&master, &slave).await;
    client.shutdown().await;
    wait_until("the master sees the slave leave", Duration::from_secs(5), || ha.connection_count() == 0).await;

    let stopped_at = slave.max_phy_offset();
    put_range(&master, 100, 500).await;
    assert!(master.max_phy_offset() - stopped_at > 2 * SEGMENT_BYTES as i64, "the slave lags by segments");
    let client = start_slave(&slave, ha.local_addr(), ha_config());
    wait_caught_up(&master, &slave).await;
    assert_eq!(slave.min_phy_offset(), 0, "the slave continued its own log");
    assert!(assert_commit_logs_identical(&master, &slave) >= 5);
    assert_consume_queues_equal(&master, &slave);
    client.shutdown().await;
    ha.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slave_restarted_cleanly_resumes_from_its_offset() {
    let (mdir, sdir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (master, ha) = start_master(mdir.path(), ha_config()).await;
    let slave = open_store(sdir.path(), FlushDiskType::AsyncFlush);
    let client = start_slave(&slave, ha.local_addr(), ha_config());
    wait_shipping(&ha).await;
    put_range(&master, 0, 200).await;
    wait_caught_up(&master, &slave).await;
    client.shutdown().await;
    drop(client);
    slave.shutdown();
    drop(slave);

    put_range(&master, 200, 400).await;
    let slave = open_store(sdir.path(), FlushDiskType::AsyncFlush);
    let client = start_slave(&slave, ha.local_addr(), ha_config());
    wait_caught_up(&master, &slave).await;
    assert_eq!(slave.min_phy_offset(), 0);
    assert_commit_logs_identical(&master, &slave);
    assert_consume_queues_equal(&master, &slave);
    client.shutdown().await;
    ha.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slave_crashed_mid_stream_recovers_cuts_its_torn_tail_and_resumes() {
    let (mdir, sdir, crashed) =
        (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (master, ha) = start_master(mdir.path(), ha_config()).await;
    let slave = open_store(sdir.path(), FlushDiskType::AsyncFlush);
    let client = start_slave(&slave, ha.local_addr(), ha_config());
    wait_shipping(&ha).await;
    put_range(&master, 0, 150).await;
    wait_caught_up(&master, &slave).await;

    // The master keeps writing while the slave's files are taken as a crash leaves them.
    let writer = {
        let master = master.clone();
        tokio::spawn(async move { put_range(&master, 150, 600).await })
    };
    wait_until("the slave is mid-stream", Duration::from_secs(20), || {
        slave.max_phy_offset() > 3 * SEGMENT_BYTES as i64
    })
    .await;
    copy_as_crashed(sdir.path(), crashed.path());
    client.shutdown().await;
    drop(client);
    drop(slave);
    // Tear the newest record: cut the last segment with data inside its last record.
    let torn_at = tear_last_record(crashed.path());

    let slave = open_store(crashed.path(), FlushDiskType::AsyncFlush);
    let recovered = slave.max_phy_offset();
    assert!(recovered > 0 && recovered <= torn_at, "recovery keeps a whole-record prefix ({recovered} <= {torn_at})");
    let client = start_slave(&slave, ha.local_addr(), ha_config());
    writer.await.unwrap();
    wait_caught_up(&master, &slave).await;
    assert_eq!(slave.min_phy_offset(), 0, "the slave resumed its own log, not an empty one");
    assert!(assert_commit_logs_identical(&master, &slave) >= 5);
    assert_consume_queues_equal(&master, &slave);
    client.shutdown().await;
    ha.shutdown().await;
}

/// Cuts the last CommitLog segment holding data a few bytes before its data ends; returns
/// the physical offset of the cut.
fn tear_last_record(root: &std::path::Path) -> i64 {
    let dir = root.join("commitlog");
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    for path in files.iter().rev() {
        let bytes = std::fs::read(path).unwrap();
        let Some(last_nonzero) = bytes.iter().rposition(|b| *b != 0) else { continue };
        let cut = last_nonzero.saturating_sub(10);
        std::fs::OpenOptions::new().write(true).open(path).unwrap().set_len(cut as u64).unwrap();
        let base: i64 = path.file_name().unwrap().to_str().unwrap().parse().unwrap();
        return base + cut as i64;
    }
    panic!("no segment with data");
}
