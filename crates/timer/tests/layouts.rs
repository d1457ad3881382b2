//! Golden bytes of the timer's on-disk records, written out by hand from Java's
//! `TimerMessageStore#doEnqueue`, `TimerWheel#putSlot`, `TimerCheckpoint#encode` and
//! `TimerLog#append`, and the files a real run leaves behind.

mod common;

use std::time::Duration;

use common::*;
use ferromq_protocol::message::java_string_hash;
use ferromq_timer::{
    blank_marker, round_deliver_ms, DataVersion, Slot, TimerCheckpoint, TimerLogUnit, BLANK_MAGIC_CODE, MAGIC_DEFAULT,
    MAGIC_ROLL, TIMER_TOPIC, UNIT_SIZE,
};

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn timerlog_unit_is_52_big_endian_bytes_in_javas_order() {
    let unit = TimerLogUnit {
        prev_pos: -1,
        magic: MAGIC_DEFAULT | MAGIC_ROLL,
        write_time_ms: 1_700_000_000_000,
        delay_ms: 5000,
        commit_log_offset: 0x0102_0304_0506_0708,
        msg_size: 300,
        topic_hash: java_string_hash("TopicTest"),
        reserved: 0,
    };
    let bytes = unit.encode();
    assert_eq!(bytes.len(), UNIT_SIZE);
    assert_eq!(
        hex(&bytes),
        concat!(
            "00000034",         // size 52
            "ffffffffffffffff", // prevPos -1
            "00000003",         // magic default | roll
            "0000018bcfe56800", // writeTime 1700000000000
            "00001388",         // delay 5000
            "0102030405060708", // commitLogOffset
            "0000012c",         // msgSize 300
            "8e987641",         // "TopicTest".hashCode()
            "0000000000000000", // reserved
        )
    );
    assert_eq!(TimerLogUnit::decode(&bytes), Some(unit));
    assert_eq!(unit.slot_time_ms(), 1_700_000_005_000);
}

#[test]
fn blank_tail_is_length_zero_and_javas_magic() {
    assert_eq!(hex(&blank_marker(36)), "000000240000000000000000cbd43194");
    assert_eq!(BLANK_MAGIC_CODE, -875_286_124);
}

#[test]
fn wheel_slot_stores_time_in_precision_units() {
    let slot = Slot { time_ms: 1_700_000_000_000, first_pos: 0, last_pos: 104, num: 3, magic: 0 };
    assert_eq!(
        hex(&slot.encode(1000)),
        concat!("000000006553f100", "0000000000000000", "0000000000000068", "00000003", "00000000")
    );
    assert_eq!(&slot.encode(100)[..8], &17_000_000_000i64.to_be_bytes());
}

#[test]
fn timercheck_is_seven_longs() {
    // The values of Java's TimerCheckPointTest.
    let cp = TimerCheckpoint {
        last_read_time_ms: 1000,
        last_timer_log_flush_pos: 1100,
        last_timer_queue_offset: 1200,
        master_timer_queue_offset: 1300,
        data_version: DataVersion { state_version: 1400, timestamp: 1500, counter: 1600 },
    };
    assert_eq!(
        hex(&cp.encode()),
        concat!(
            "00000000000003e8",
            "000000000000044c",
            "00000000000004b0",
            "0000000000000514",
            "0000000000000578",
            "00000000000005dc",
            "0000000000000640",
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_on_disk_have_javas_layout() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(dir.path());
    let config = timer_config(100);
    let running = Running::start(config.clone(), dir.path(), &store);
    let deliver = now_ms() + 60_000;
    let msg = timer_message("Layout", 0, deliver, "u1", &config);
    put(&store, msg).await;
    let timer = running.timer.clone();
    assert!(eventually(Duration::from_secs(5), || timer.pending() == 1).await);
    assert!(eventually(Duration::from_secs(5), || timer.flush().unwrap().last_timer_queue_offset == 1).await);
    // The slot the wheel files it in (an exact multiple of the precision goes one slot
    // earlier, as in Java; `now + 60 s` is one once in a hundred runs).
    let timer_out = round_deliver_ms(deliver, 100);
    let cq = store.consume_queue_units(TIMER_TOPIC, 0, 0, 1);

    let log = std::fs::read(dir.path().join("timerlog").join("00000000000000000000")).unwrap();
    assert_eq!(log.len(), 64 * 1024);
    let unit = TimerLogUnit::decode(&log[..UNIT_SIZE]).unwrap();
    assert_eq!(unit.prev_pos, -1);
    assert_eq!(unit.magic, MAGIC_DEFAULT);
    assert_eq!(unit.slot_time_ms(), timer_out);
    assert_eq!(unit.commit_log_offset, cq[0].commit_log_offset);
    assert_eq!(unit.msg_size, cq[0].size);
    assert_eq!(unit.topic_hash, java_string_hash("Layout"));
    assert!(log[UNIT_SIZE..].iter().all(|&b| b == 0));

    let wheel = std::fs::read(dir.path().join("timerwheel")).unwrap();
    assert_eq!(wheel.len(), 2 * 3600 * 32);
    let index = (timer_out / 100 % 7200) as usize;
    let mut rec = [0u8; 32];
    rec.copy_from_slice(&wheel[index * 32..index * 32 + 32]);
    assert_eq!(Slot::decode(&rec, 100), Slot { time_ms: timer_out, first_pos: 0, last_pos: 0, num: 1, magic: 0 });

    let check = std::fs::read(dir.path().join("config").join("timercheck")).unwrap();
    assert_eq!(check.len(), 4096);
    assert_eq!(TimerCheckpoint::decode(&check).unwrap(), timer.checkpoint());
    drop(timer);
    running.stop().await;
}
