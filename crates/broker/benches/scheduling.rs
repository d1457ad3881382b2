//! Throughput of the broker's background movers, against a real broker on loopback:
//!
//! * delay levels: N messages sent with DELAY=1 (1 s); reported is the rate at which the
//!   schedule service moves them to their real queue once due (first to last delivery);
//! * transactions: half send + END_TRANSACTION commit pairs, `IN_FLIGHT` at a time; reported
//!   is committed messages per second until all are in the real topic.
//!
//! `cargo bench -p ferromq-broker --bench scheduling` (set `FERROMQ_BENCH_N` for the count).
//! Figures go to docs/benchmarks.md as medians of several runs.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ferromq_protocol::header::{
    EndTransactionRequestHeader, GetMaxOffsetRequestHeader, SendMessageRequestHeader, SendMessageRequestHeaderV2,
};
use ferromq_protocol::message::{decode_offset_msg_id, sysflag, MessageProperties};
use ferromq_protocol::{request_code, response_code, RemotingCommand};
use ferromq_remoting::{ClientConfig, RemotingClient};
use ferromq_testkit::LocalCluster;
use tokio::sync::Semaphore;

const IN_FLIGHT: usize = 64;
const T: Duration = Duration::from_secs(30);

fn send(topic: &str, body: &[u8], props: &MessageProperties, sys_flag: i32) -> RemotingCommand {
    let h: SendMessageRequestHeaderV2 = SendMessageRequestHeader {
        producer_group: "benchpg".into(),
        topic: topic.into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 1,
        queue_id: 0,
        sys_flag,
        born_timestamp: 1,
        properties: Some(props.encode()),
        ..SendMessageRequestHeader::default()
    }
    .into();
    RemotingCommand::request(request_code::SEND_MESSAGE_V2).with_header(&h).with_body(body.to_vec())
}

async fn max_offset(client: &RemotingClient, addr: &str, topic: &str) -> i64 {
    let req = RemotingCommand::request(request_code::GET_MAX_OFFSET).with_header(&GetMaxOffsetRequestHeader {
        topic: topic.into(),
        queue_id: 0,
        committed: None,
        broker_name: None,
        lo: None,
    });
    let r = client.invoke(addr, req, T).await.unwrap();
    if r.code != response_code::SUCCESS {
        return 0;
    }
    r.ext_fields.get("offset").and_then(|o| o.parse().ok()).unwrap_or(0)
}

/// Sends `n` requests built by `make`, `IN_FLIGHT` at a time; returns their responses.
async fn pipeline(
    client: &Arc<RemotingClient>,
    addr: &str,
    n: usize,
    make: impl Fn(usize) -> RemotingCommand,
) -> Vec<RemotingCommand> {
    let permits = Arc::new(Semaphore::new(IN_FLIGHT));
    let mut tasks = Vec::with_capacity(n);
    for i in 0..n {
        let permit = permits.clone().acquire_owned().await.unwrap();
        let (client, addr, req) = (client.clone(), addr.to_owned(), make(i));
        tasks.push(tokio::spawn(async move {
            let r = client.invoke(&addr, req, T).await.unwrap();
            drop(permit);
            r
        }));
    }
    let mut out = Vec::with_capacity(n);
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out
}

async fn delay_levels(n: usize) -> f64 {
    let c = LocalCluster::start(|s| {
        s.store.message_delay_level = ferromq_store::DelayLevels::parse("1s").unwrap();
    })
    .await;
    let client = Arc::new(RemotingClient::new(ClientConfig::default()));
    let mut props = MessageProperties::new();
    props.insert("DELAY", "1");
    let body = vec![b'x'; 1024];
    let sent = pipeline(&client, &c.broker_addr, n, |_| send("BenchDelayed", &body, &props, 0)).await;
    assert!(sent.iter().all(|r| r.code == response_code::SUCCESS));
    // From the first delivery to the last.
    let deadline = Instant::now() + T;
    while max_offset(&client, &c.broker_addr, "BenchDelayed").await == 0 {
        assert!(Instant::now() < deadline, "nothing delivered");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let first = Instant::now();
    while (max_offset(&client, &c.broker_addr, "BenchDelayed").await as usize) < n {
        assert!(Instant::now() < deadline + T, "not all delivered");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let rate = n as f64 / first.elapsed().as_secs_f64();
    client.shutdown().await;
    c.stop().await;
    rate
}

/// The baseline of the same run: plain sends of the same size, `IN_FLIGHT` at a time.
async fn plain_sends(n: usize) -> f64 {
    let c = LocalCluster::start(|_| {}).await;
    let client = Arc::new(RemotingClient::new(ClientConfig::default()));
    let props = MessageProperties::new();
    let body = vec![b'x'; 1024];
    let began = Instant::now();
    let sent = pipeline(&client, &c.broker_addr, n, |_| send("BenchPlain", &body, &props, 0)).await;
    let rate = n as f64 / began.elapsed().as_secs_f64();
    assert!(sent.iter().all(|r| r.code == response_code::SUCCESS));
    client.shutdown().await;
    c.stop().await;
    rate
}

async fn transactions(n: usize) -> f64 {
    let c = LocalCluster::start(|_| {}).await;
    let client = Arc::new(RemotingClient::new(ClientConfig::default()));
    let mut props = MessageProperties::new();
    props.insert("TRAN_MSG", "true");
    props.insert("PGROUP", "benchpg");
    let body = vec![b'x'; 1024];
    let began = Instant::now();
    let permits = Arc::new(Semaphore::new(IN_FLIGHT));
    let mut tasks = Vec::with_capacity(n);
    for _ in 0..n {
        let permit = permits.clone().acquire_owned().await.unwrap();
        let (client, addr) = (client.clone(), c.broker_addr.clone());
        let req = send("BenchTx", &body, &props, sysflag::TRANSACTION_PREPARED_TYPE);
        tasks.push(tokio::spawn(async move {
            let r = client.invoke(&addr, req, T).await.unwrap();
            assert_eq!(r.code, response_code::SUCCESS);
            let h = r.decode_header::<ferromq_protocol::header::SendMessageResponseHeader>().unwrap();
            let (_, commit_log_offset) = decode_offset_msg_id(&h.msg_id).unwrap();
            let end = RemotingCommand::request(request_code::END_TRANSACTION)
                .with_header(&EndTransactionRequestHeader {
                    topic: None,
                    producer_group: "benchpg".into(),
                    tran_state_table_offset: h.queue_offset,
                    commit_log_offset,
                    commit_or_rollback: sysflag::TRANSACTION_COMMIT_TYPE,
                    from_transaction_check: Some(false),
                    msg_id: h.msg_id,
                    transaction_id: h.transaction_id,
                    broker_name: None,
                })
                .into_oneway();
            client.invoke_oneway(&addr, end).await.unwrap();
            drop(permit);
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let deadline = Instant::now() + T;
    while (max_offset(&client, &c.broker_addr, "BenchTx").await as usize) < n {
        assert!(Instant::now() < deadline, "not all committed");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let rate = n as f64 / began.elapsed().as_secs_f64();
    client.shutdown().await;
    c.stop().await;
    rate
}

fn main() {
    // `cargo bench` passes `--bench`; filters are not supported by this plain harness.
    let n: usize = std::env::var("FERROMQ_BENCH_N").ok().and_then(|v| v.parse().ok()).unwrap_or(20_000);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let plain = plain_sends(n).await;
        println!("baseline: {n} plain sends of 1 KiB at {plain:.0} msg/s ({IN_FLIGHT} in flight)");
        let moved = delay_levels(n).await;
        println!(
            "delay levels: {n} messages of 1 KiB moved from SCHEDULE_TOPIC_XXXX at {moved:.0} msg/s ({:.2} x baseline)",
            moved / plain
        );
        let committed = transactions(n).await;
        println!(
            "transactions: {n} half sends + commits of 1 KiB at {committed:.0} committed msg/s ({:.2} x baseline)",
            committed / plain
        );
    });
}
