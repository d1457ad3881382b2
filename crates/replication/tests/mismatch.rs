//! A slave refuses what it cannot append at its own end: a frame at another offset, or a log
//! that diverged from the master's. It closes the connection with the reason logged and
//! leaves its CommitLog as it was.

mod common;

use std::time::Duration;

use common::*;
use ferromq_replication::frame::{encode_transfer_header, REPORT_HEADER_SIZE};
use ferromq_replication::HaConfig;
use ferromq_store::FlushDiskType;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frame_at_another_offset_closes_the_connection_with_the_reason_logged() {
    common::log::install();
    let sdir = tempfile::tempdir().unwrap();
    let slave = open_store(sdir.path(), FlushDiskType::AsyncFlush);
    let end = put_range(&slave, 0, 5).await;
    let fake_master = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let client = start_slave(&slave, fake_master.local_addr().unwrap(), ha_config());

    let (mut conn, _) = fake_master.accept().await.unwrap();
    let mut report = [0u8; REPORT_HEADER_SIZE];
    conn.read_exact(&mut report).await.unwrap();
    assert_eq!(i64::from_be_bytes(report), end, "the slave reports its end on connect");
    // A frame 100 bytes past the slave's end.
    let mut frame = encode_transfer_header(end + 100, 4).to_vec();
    frame.extend_from_slice(b"junk");
    conn.write_all(&frame).await.unwrap();
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(5), conn.read_to_end(&mut rest)).await;
    assert!(closed.is_ok(), "the slave closes the connection");
    assert_eq!(slave.max_phy_offset(), end, "nothing was appended");
    // The slave logs once the connection is dropped, so the line may come just after the close.
    let error_line = [String::from("ERROR"), "cannot append".into(), (end + 100).to_string(), end.to_string()];
    let error_line: Vec<&str> = error_line.iter().map(String::as_str).collect();
    wait_until("the slave logs why it closed", Duration::from_secs(5), || {
        !common::log::lines_with(&error_line).is_empty()
    })
    .await;
    let logged = common::log::lines_with(&error_line);
    assert_eq!(logged.len(), 1, "one clear error line: {logged:?}");

    // It reconnects and reports the same offset again.
    let (mut again, _) = tokio::time::timeout(Duration::from_secs(5), fake_master.accept()).await.unwrap().unwrap();
    again.read_exact(&mut report).await.unwrap();
    assert_eq!(i64::from_be_bytes(report), end);
    client.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slave_whose_log_diverged_is_refused_and_keeps_its_data() {
    common::log::install();
    let (mdir, sdir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (master, ha) = start_master(mdir.path(), HaConfig { ..ha_config() }).await;
    put_range(&master, 0, 50).await;
    // The slave wrote a log of its own (say, it was a master once): its end falls inside one
    // of the master's records.
    let slave = open_store(sdir.path(), FlushDiskType::AsyncFlush);
    let own_end = put_range(&slave, 1000, 1001).await;
    let own_files = std::fs::read(slave.config().commit_log_dir().join("00000000000000000000")).unwrap();
    let client = start_slave(&slave, ha.local_addr(), ha_config());

    wait_until("the slave refuses the master's data", Duration::from_secs(10), || {
        !common::log::lines_with(&["ERROR", "cannot append", "not a CommitLog record"]).is_empty()
    })
    .await;
    assert_eq!(slave.max_phy_offset(), own_end, "the slave kept its own log");
    assert_eq!(std::fs::read(slave.config().commit_log_dir().join("00000000000000000000")).unwrap(), own_files);
    wait_until("the master sees the connection end", Duration::from_secs(5), || {
        !common::log::lines_with(&["slave connection closed"]).is_empty()
    })
    .await;
    client.shutdown().await;
    ha.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slave_ahead_of_its_master_is_refused_and_never_counts_as_a_replica() {
    common::log::install();
    let (mdir, sdir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (master, ha) = start_master(mdir.path(), ha_config()).await;
    let master_end = put_range(&master, 0, 5).await;
    // A slave whose own log is longer than the master's (an old master's, say).
    let slave = open_store(sdir.path(), FlushDiskType::AsyncFlush);
    let slave_end = put_range(&slave, 0, 200).await;
    assert!(slave_end > master_end);
    let client = start_slave(&slave, ha.local_addr(), ha_config());
    wait_until("the master refuses the slave", Duration::from_secs(10), || {
        !common::log::lines_with(&["ERROR", "slave refused", "diverged"]).is_empty()
    })
    .await;
    // Its report never counts: a put waiting for one slave is not confirmed by it.
    let waited = ha.wait_for_replicas(master_end, 2, Duration::from_millis(300)).await;
    assert!(waited.is_err(), "a diverged slave confirmed a put: {waited:?}");
    assert!(ha.push2_slave_max_offset() <= master_end);
    client.shutdown().await;
    ha.shutdown().await;
}
