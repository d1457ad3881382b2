//! The timer wheel over a real store: delivery times, ordering, rolls, recalls, clean
//! restarts, downtime, and a crash without a checkpoint. Assertions use windows: a message is
//! never delivered before its time, and arrives within one precision step plus a wide margin.

mod common;

use std::collections::HashMap;
use std::sync::atomic::AtomicI64;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::*;
use ferromq_protocol::message::{keys, MessageProperties, StoredMessage};
use ferromq_timer::recall::{check_recall, delete_marker, recall_handle_for_send};
use ferromq_timer::{timer_transform, TimerConfig, TimerDecision, TimerMessageStore, TIMER_TOPIC};

/// Slack for scheduling on a loaded machine, on top of one precision step.
const MARGIN_MS: i64 = 1500;

fn assert_on_time(d: &Delivered, precision_ms: i64) {
    let deliver = d.deliver_ms();
    assert!(d.store_timestamp_ms >= deliver, "{} delivered {} ms early", d.uniq, deliver - d.store_timestamp_ms);
    assert!(
        d.store_timestamp_ms <= deliver + precision_ms + MARGIN_MS,
        "{} delivered {} ms late",
        d.uniq,
        d.store_timestamp_ms - deliver
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn due_messages_arrive_at_or_after_their_time_within_one_precision_step() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(dir.path());
    let config = TimerConfig { timer_precision_ms: 1000, ..timer_config(1000) };
    let running = Running::start(config.clone(), dir.path(), &store);
    let now = now_ms();
    // The second one is an exact multiple of the precision: filed one step earlier.
    let exact = (now + 2000).div_euclid(1000) * 1000 + 1000;
    let times = [now + 1200, exact, now + 2700];
    for (i, t) in times.iter().enumerate() {
        put(&store, timer_message("Orders", 2, *t, &format!("m{i}"), &config)).await;
    }
    let got = wait_for_distinct(&store, "Orders", 2, 3, Duration::from_secs(10)).await;
    assert_eq!(got.len(), 3, "{got:?}");
    for d in &got {
        assert_on_time(d, 1000);
        assert_eq!(d.props.get(keys::REAL_QID), Some("2"));
        assert!(d.props.get(keys::TIMER_ENQUEUE_MS).is_some());
        assert!(d.props.get(keys::TIMER_DEQUEUE_MS).is_some());
        assert_eq!(&d.body[..], format!("body-{}", d.uniq).as_bytes());
    }
    let m1 = got.iter().find(|d| d.uniq == "m1").unwrap();
    assert_eq!(m1.timer_out_ms(), exact - 1000);
    assert_eq!(running.timer.pending(), 0);
    assert_eq!(running.timer.stats().delivered, 3);
    // Per topic: three in, three out, none waiting; three deliveries timed.
    let counts = running.timer.topic_counts();
    let orders = counts.iter().find(|(t, _)| t == "Orders").expect("Orders counted").1;
    assert_eq!((orders.enqueued, orders.dequeued, orders.timing()), (3, 3, 0));
    let latency = running.timer.delay_latency();
    assert_eq!((latency.count, latency.buckets.iter().sum::<u64>()), (3, 3));
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_timers_are_delivered_in_slot_order() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(dir.path());
    let config = timer_config(100);
    let running = Running::start(config.clone(), dir.path(), &store);
    let mut rng = Rng(0x5EED_0001);
    let now = now_ms();
    let n = 400;
    for i in 0..n {
        let deliver = now + 400 + rng.below(2000) as i64;
        put(&store, timer_message("Many", 0, deliver, &format!("m{i}"), &config)).await;
    }
    let got = wait_for_distinct(&store, "Many", 0, n, Duration::from_secs(15)).await;
    assert_eq!(got.len(), n, "each message exactly once");
    for d in &got {
        assert_on_time(d, 100);
    }
    let slots: Vec<i64> = got.iter().map(Delivered::timer_out_ms).collect();
    assert!(slots.windows(2).all(|w| w[0] <= w[1]), "delivered out of slot order: {slots:?}");
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timer_far_beyond_a_small_roll_window_rolls_and_arrives_on_time() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(dir.path());
    // A window of 10 slots of 100 ms: a message 4 s away rolls several times.
    let config = TimerConfig { timer_roll_window_slot: 10, ..timer_config(100) };
    let running = Running::start(config.clone(), dir.path(), &store);
    let deliver = now_ms() + 4000;
    put(&store, timer_message("Far", 1, deliver, "far", &config)).await;
    let got = wait_for_distinct(&store, "Far", 1, 1, Duration::from_secs(10)).await;
    assert_eq!(got.len(), 1);
    assert_on_time(&got[0], 100);
    let rolls: i32 = got[0].props.get(keys::TIMER_ROLL_TIMES).and_then(|v| v.parse().ok()).unwrap_or(0);
    assert!(rolls >= 2, "rolled {rolls} times");
    assert!(running.timer.stats().rolled >= 2);
    // Each roll left the wheel and came back: in and out balance once it is delivered.
    let far = running.timer.topic_counts().into_iter().find(|(t, _)| t == "Far").expect("Far counted").1;
    assert!(far.enqueued >= 3 && far.timing() == 0, "{far:?}");
    // The rolls were re-put to the timer topic, where the original also is.
    assert!(store.max_offset_in_queue(TIMER_TOPIC, 0) >= 3);
    running.stop().await;
}

/// Sends a timer message, returning the properties the broker stored (for its recall handle).
async fn send(
    store: &ferromq_store::MessageStore,
    topic: &str,
    deliver: i64,
    uniq: &str,
    config: &TimerConfig,
) -> MessageProperties {
    let msg = timer_message(topic, 0, deliver, uniq, config);
    let props = MessageProperties::decode(&msg.properties);
    put(store, msg).await;
    props
}

/// What the broker does for RECALL_MESSAGE: check, build the marker, transform, store.
async fn recall(store: &ferromq_store::MessageStore, props: &MessageProperties, topic: &str, config: &TimerConfig) {
    let handle_text = recall_handle_for_send(props, "broker-a").expect("a recall handle");
    let handle = check_recall(&handle_text, topic, "broker-a", now_ms(), config).expect("recall accepted");
    let mut marker = delete_marker(&handle, "pg", now_ms());
    marker.born_host = host();
    marker.store_host = host();
    let mut marker_props = MessageProperties::decode(&marker.properties);
    let decision = timer_transform(&mut marker_props, &mut marker.topic, &mut marker.queue_id, now_ms, config);
    assert!(matches!(decision, Ok(TimerDecision::Wheel { .. })), "{decision:?}");
    marker.properties = marker_props.encode();
    put(store, marker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recalled_timer_is_not_delivered_and_its_neighbour_is() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(dir.path());
    let config = timer_config(100);
    let running = Running::start(config.clone(), dir.path(), &store);
    let deliver = now_ms() + 1500;
    let doomed = send(&store, "Recall", deliver, "doomed", &config).await;
    send(&store, "Recall", deliver, "kept", &config).await;
    recall(&store, &doomed, "Recall", &config).await;
    assert!(eventually(Duration::from_secs(5), || running.timer.stats().enqueued == 3).await);
    assert_eq!(running.timer.pending(), 1, "two messages, one delete marker");
    let waiting = running.timer.topic_counts().into_iter().find(|(t, _)| t == "Recall").expect("counted").1;
    assert_eq!(waiting.timing(), 2, "markers are not messages: {waiting:?}");
    let got = wait_for_distinct(&store, "Recall", 0, 1, Duration::from_secs(6)).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let got = if got.len() == 1 { read_queue(&store, "Recall", 0) } else { got };
    let ids: Vec<&str> = got.iter().map(|d| d.uniq.as_str()).collect();
    assert_eq!(ids, ["kept"]);
    assert_eq!(running.timer.stats().recalled, 1);
    let done = running.timer.topic_counts().into_iter().find(|(t, _)| t == "Recall").expect("counted").1;
    assert_eq!(done.timing(), 0, "the recalled message left the wheel too: {done:?}");
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recall_cancels_a_message_that_is_still_rolling() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(dir.path());
    // Window of 30 slots (3 s): the message and its marker both roll before meeting in
    // their slot; a third of a window (1 s) of slack keeps rolls from arriving late.
    let config = TimerConfig { timer_roll_window_slot: 30, ..timer_config(100) };
    let running = Running::start(config.clone(), dir.path(), &store);
    let deliver = now_ms() + 6000;
    let doomed = send(&store, "RecallRoll", deliver, "doomed", &config).await;
    send(&store, "RecallRoll", deliver, "kept", &config).await;
    recall(&store, &doomed, "RecallRoll", &config).await;
    let got = wait_for_distinct(&store, "RecallRoll", 0, 1, Duration::from_secs(12)).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let got = if got.len() == 1 { read_queue(&store, "RecallRoll", 0) } else { got };
    let ids: Vec<&str> = got.iter().map(|d| d.uniq.as_str()).collect();
    assert_eq!(ids, ["kept"]);
    let stats = running.timer.stats();
    assert!(stats.rolled >= 3, "{stats:?}");
    assert_eq!(stats.recalled, 1);
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clean_restart_keeps_pending_timers_and_delivers_each_once() {
    let dir = tempfile::tempdir().unwrap();
    let config = timer_config(100);
    let n = 60;
    let store = open_store(dir.path());
    let running = Running::start(config.clone(), dir.path(), &store);
    let now = now_ms();
    for i in 0..n {
        put(&store, timer_message("Restart", 0, now + 1500 + i * 20, &format!("m{i}"), &config)).await;
    }
    let timer = running.timer.clone();
    assert!(eventually(Duration::from_secs(5), || timer.pending() == n as u64).await);
    drop(timer);
    running.stop().await;
    store.shutdown();
    drop(store);

    let store = open_store(dir.path());
    // Stored while the timer was down: enqueued from the checkpoint's queue offset.
    let now = now_ms();
    for i in n..n + 20 {
        put(&store, timer_message("Restart", 0, now + 1000 + i * 10, &format!("m{i}"), &config)).await;
    }
    let running = Running::start(config.clone(), dir.path(), &store);
    assert!(running.timer.pending() >= n as u64, "recovered count");
    let got = wait_for_distinct(&store, "Restart", 0, n as usize + 20, Duration::from_secs(10)).await;
    assert_eq!(got.len(), n as usize + 20, "each exactly once after a clean restart");
    for d in &got {
        assert_on_time(d, 100);
    }
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timers_due_during_downtime_are_delivered_at_once_after_restart() {
    let dir = tempfile::tempdir().unwrap();
    let config = timer_config(100);
    let store = open_store(dir.path());
    let running = Running::start(config.clone(), dir.path(), &store);
    let deliver = now_ms() + 800;
    for i in 0..20 {
        put(&store, timer_message("Downtime", 0, deliver, &format!("m{i}"), &config)).await;
    }
    let timer = running.timer.clone();
    assert!(eventually(Duration::from_secs(5), || timer.pending() == 20).await);
    drop(timer);
    running.stop().await;
    store.shutdown();
    drop(store);
    tokio::time::sleep(Duration::from_millis(1500)).await;

    let store = open_store(dir.path());
    let reopened = now_ms();
    let running = Running::start(config, dir.path(), &store);
    let got = wait_for_distinct(&store, "Downtime", 0, 20, Duration::from_secs(5)).await;
    assert_eq!(got.len(), 20);
    for d in &got {
        assert!(d.store_timestamp_ms >= d.deliver_ms());
        assert!(
            d.store_timestamp_ms - reopened < 1000,
            "delivered {} ms after the restart",
            d.store_timestamp_ms - reopened
        );
    }
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_without_any_checkpoint_loses_no_timer() {
    let dir = tempfile::tempdir().unwrap();
    // No periodic flush: the crash leaves the wheel file and checkpoint as they were at open.
    let config = TimerConfig { timer_flush_interval_ms: 3_600_000, ..timer_config(100) };
    let store = open_store(dir.path());
    let running = Running::start(config.clone(), dir.path(), &store);
    let mut rng = Rng(0xC0FFEE);
    let now = now_ms();
    let n = 120;
    let mut deliver_at = HashMap::new();
    for i in 0..n {
        let uniq = format!("m{i}");
        let deliver = now + 300 + rng.below(2500) as i64;
        deliver_at.insert(uniq.clone(), deliver);
        put(&store, timer_message("Crash", 0, deliver, &uniq, &config)).await;
    }
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let before = read_queue(&store, "Crash", 0).len();
    running.crash().await;
    assert!(ferromq_timer::TimerCheckpoint::default() == checkpoint_on_disk(dir.path()), "nothing was checkpointed");
    store.shutdown();
    drop(store);

    let store = open_store(dir.path());
    let running = Running::start(config, dir.path(), &store);
    let got = wait_for_distinct(&store, "Crash", 0, n, Duration::from_secs(10)).await;
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for d in &got {
        assert!(d.store_timestamp_ms >= deliver_at[&d.uniq], "{} early", d.uniq);
        *seen.entry(d.uniq.as_str()).or_default() += 1;
    }
    assert_eq!(seen.len(), n, "every timer delivered (before the crash: {before})");
    running.stop().await;
}

fn checkpoint_on_disk(root: &std::path::Path) -> ferromq_timer::TimerCheckpoint {
    let bytes = std::fs::read(root.join("config").join("timercheck")).unwrap();
    ferromq_timer::TimerCheckpoint::decode(&bytes).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkpoint_follows_progress_and_wheel_size_is_enforced() {
    let dir = tempfile::tempdir().unwrap();
    let config = timer_config(100);
    let store = open_store(dir.path());
    let running = Running::start(config.clone(), dir.path(), &store);
    let deliver = now_ms() + 300;
    put(&store, timer_message("Ckpt", 0, deliver, "a", &config)).await;
    wait_for_distinct(&store, "Ckpt", 0, 1, Duration::from_secs(5)).await;
    let timer = running.timer.clone();
    assert!(
        eventually(Duration::from_secs(5), || {
            let cp = timer.checkpoint();
            cp.last_timer_queue_offset == 1 && cp.last_read_time_ms > deliver - 100
        })
        .await,
        "{:?}",
        timer.checkpoint()
    );
    let on_disk = checkpoint_on_disk(dir.path());
    assert_eq!(on_disk, timer.checkpoint());
    assert!(on_disk.data_version.counter >= 1);
    drop(timer);
    running.stop().await;
    let other = TimerConfig { timer_slots_total: 1800, ..config };
    assert!(matches!(
        TimerMessageStore::open(other, dir.path(), store.clone()),
        Err(ferromq_timer::TimerError::WheelSizeMismatch { .. })
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_read_pointer_never_passes_the_clock() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(dir.path());
    let config = timer_config(100);
    let start = now_ms();
    let clock = Arc::new(ManualClock(AtomicI64::new(start)));
    let running = Running::start_with_clock(config.clone(), dir.path(), &store, clock.clone());
    let deliver = start + 5_000;
    let mut props = MessageProperties::new();
    props.insert(keys::UNIQ_KEY, "frozen");
    props.insert(keys::TIMER_DELIVER_MS, deliver.to_string());
    let (mut topic, mut queue_id) = ("Frozen".to_owned(), 0);
    timer_transform(&mut props, &mut topic, &mut queue_id, || start, &config).unwrap();
    let msg = StoredMessage {
        topic,
        queue_id,
        properties: props.encode(),
        store_host: host(),
        born_host: host(),
        ..StoredMessage::default()
    };
    put(&store, msg).await;
    let timer = running.timer.clone();
    assert!(eventually(Duration::from_secs(5), || timer.pending() == 1).await);

    // Real time passes; the timer's clock stands just before the end of the message's slot
    // (which is at or after the time it asked for).
    let slot_end = ferromq_timer::round_deliver_ms(deliver, 100) + 100;
    assert!(slot_end >= deliver);
    clock.set(slot_end - 1);
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(read_queue(&store, "Frozen", 0).is_empty());
    assert!(timer.read_time_ms() < slot_end);
    assert_eq!(timer.pending(), 1);

    clock.set(slot_end);
    let got = wait_for_distinct(&store, "Frozen", 0, 1, Duration::from_secs(5)).await;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].props.get(keys::TIMER_DEQUEUE_MS), Some(slot_end.to_string().as_str()));
    assert!(timer.read_time_ms() <= slot_end);
    drop(timer);
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_reaching_the_wheel_late_are_delivered_at_once_and_late_recalls_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(dir.path());
    let running = Running::start(timer_config(100), dir.path(), &store);
    // As if stored long ago: TIMER_OUT_MS already behind the wheel's write time.
    let past = now_ms() - 10_000;
    let late = |uniq: &str, extra: &str| {
        StoredMessage {
        topic: TIMER_TOPIC.into(),
        queue_id: 0,
        body: Bytes::from_static(b"late"),
        born_host: host(),
        store_host: host(),
        properties: format!(
            "UNIQ_KEY\u{1}{uniq}\u{2}TIMER_DELIVER_MS\u{1}{past}\u{2}TIMER_OUT_MS\u{1}{past}\u{2}REAL_TOPIC\u{1}Late\u{2}REAL_QID\u{1}0\u{2}{extra}"
        ),
        ..StoredMessage::default()
    }
    };
    put(&store, late("marker", "TIMER_DEL_UNIQKEY\u{1}Late+m\u{2}")).await;
    put(&store, late("m", "")).await;
    let got = wait_for_distinct(&store, "Late", 0, 1, Duration::from_secs(5)).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let got = if got.len() == 1 { read_queue(&store, "Late", 0) } else { got };
    let ids: Vec<&str> = got.iter().map(|d| d.uniq.as_str()).collect();
    assert_eq!(ids, ["m"], "the late marker is dropped, the message delivered");
    assert_eq!(got[0].props.get(keys::TIMER_ENQUEUE_MS), Some(i64::MAX.to_string().as_str()), "never enqueued");
    assert_eq!(running.timer.stats().enqueued, 0);
    running.stop().await;
}

/// Copies a stopped store's files as a replica holds them: everything but the wheel's own
/// files (`timerwheel`, `timerlog/`, `config/timercheck`), which are not replicated.
fn copy_as_replica(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        if name == "timerwheel" || name == "timerlog" || name == "timercheck" {
            continue;
        }
        let target = to.join(&name);
        if entry.file_type().unwrap().is_dir() {
            copy_as_replica(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// How many times each message arrived.
fn arrivals(got: &[Delivered]) -> HashMap<String, usize> {
    let mut seen = HashMap::new();
    for d in got {
        *seen.entry(d.uniq.clone()).or_default() += 1;
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_promoted_replica_that_adopted_its_masters_progress_delivers_each_timer_once() {
    let dir = tempfile::tempdir().unwrap();
    let (master, adopted, unadopted) = (dir.path().join("m"), dir.path().join("a"), dir.path().join("u"));
    let config = timer_config(100);
    let store = open_store(&master);
    let running = Running::start(config.clone(), &master, &store);
    let now = now_ms();
    // Due soon (delivered by the master), and later (pending when it stops).
    for i in 0..20 {
        put(&store, timer_message("Promoted", 0, now + 300 + i * 10, &format!("early{i}"), &config)).await;
    }
    for i in 0..20 {
        put(&store, timer_message("Promoted", 0, now + 4000 + i * 10, &format!("late{i}"), &config)).await;
    }
    let delivered = wait_for_distinct(&store, "Promoted", 0, 20, Duration::from_secs(10)).await;
    assert_eq!(delivered.len(), 20, "the early ones, on the master");
    let timer = running.timer.clone();
    assert!(eventually(Duration::from_secs(5), || timer.checkpoint().last_read_time_ms > now + 600).await);
    let progress = timer.checkpoint();
    drop(timer);
    running.stop().await;
    store.shutdown();
    drop(store);

    // Two replicas holding the master's CommitLog; one adopted the master's progress.
    copy_as_replica(&master, &adopted);
    copy_as_replica(&master, &unadopted);
    assert!(ferromq_timer::adopt_master_progress(&adopted, &progress).unwrap());
    assert!(!ferromq_timer::adopt_master_progress(&adopted, &progress).unwrap(), "the same progress twice");
    let on_disk = checkpoint_on_disk(&adopted);
    assert_eq!((on_disk.last_read_time_ms, on_disk.master_timer_queue_offset), (progress.last_read_time_ms, 40));

    for (root, adopts) in [(&adopted, true), (&unadopted, false)] {
        let store = open_store(root);
        let running = Running::start(config.clone(), root, &store);
        let got = wait_for_distinct(&store, "Promoted", 0, 40, Duration::from_secs(15)).await;
        // Let anything delivered twice arrive too.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let seen = arrivals(&read_queue(&store, "Promoted", 0));
        assert_eq!(seen.len(), 40, "every timer delivered: {got:?}", got = got.len());
        let twice: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).map(|(u, _)| u.clone()).collect();
        if adopts {
            assert!(twice.is_empty(), "delivered again after the promotion: {twice:?}");
        } else {
            // Without the master's progress, the replica's wheel starts over.
            assert_eq!(twice.len(), 20, "{twice:?}");
        }
        for d in read_queue(&store, "Promoted", 0).iter().filter(|d| d.uniq.starts_with("late")) {
            assert_on_time(d, 100);
        }
        running.stop().await;
        store.shutdown();
    }
    // The adopted wheel wrote a master's checkpoint of its own once past the progress.
    let own = checkpoint_on_disk(&adopted);
    assert_eq!(own.last_timer_queue_offset, own.master_timer_queue_offset);
    assert!(own.last_timer_queue_offset >= 40);
}
