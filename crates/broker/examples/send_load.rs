//! A small load client for the broker (until `ferromq bench` exists): N concurrent senders
//! send 1 KiB messages with SEND_MESSAGE_V2 for a while; prints messages per second and send
//! latency percentiles as JSON. Bounded by time and count.
//!
//! `cargo run --release -p ferromq-broker --example send_load -- <broker addr> <senders> <seconds> [topic] [connections]`

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferromq_protocol::header::{SendMessageRequestHeader, SendMessageRequestHeaderV2};
use ferromq_protocol::{request_code, response_code, RemotingCommand};
use ferromq_remoting::{ClientConfig, RemotingClient};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let broker = args.get(1).cloned().unwrap_or_else(|| "127.0.0.1:10911".into());
    let senders: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(64);
    let seconds: u64 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(5);
    let topic = args.get(4).cloned().unwrap_or_else(|| "LoadTopic".into());
    let connections: usize = args.get(5).and_then(|s| s.parse().ok()).unwrap_or(4).max(1);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    rt.block_on(async move {
        // A few connections, as several producer processes would open.
        let clients: Vec<Arc<RemotingClient>> = (0..connections).map(|_| Arc::new(RemotingClient::new(ClientConfig::default()))).collect();
        let body = Bytes::from(vec![b'x'; 1024]);
        let stop = Arc::new(AtomicBool::new(false));
        let mut tasks = tokio::task::JoinSet::new();
        let started = Instant::now();
        for s in 0..senders {
            let (client, broker, topic, body, stop) = (clients[s % clients.len()].clone(), broker.clone(), topic.clone(), body.clone(), stop.clone());
            tasks.spawn(async move {
                let mut latencies = Vec::with_capacity(100_000);
                let mut failures = 0u64;
                // Every send of a sender carries the same header, so it is built once: the
                // load client shares the machine with the broker and should spend its CPU on
                // the protocol exchange, not on rebuilding identical headers.
                let h: SendMessageRequestHeaderV2 = SendMessageRequestHeader {
                    producer_group: "load".into(),
                    topic,
                    default_topic: "TBW102".into(),
                    default_topic_queue_nums: 8,
                    queue_id: (s % 8) as i32,
                    born_timestamp: 1,
                    ..Default::default()
                }
                .into();
                let template = RemotingCommand::request(request_code::SEND_MESSAGE_V2).with_header(&h).with_body(body);
                while !stop.load(Ordering::Relaxed) && latencies.len() < 2_000_000 {
                    let req = template.clone();
                    let t = Instant::now();
                    match client.invoke(&broker, req, Duration::from_secs(10)).await {
                        Ok(r) if r.code == response_code::SUCCESS => latencies.push(t.elapsed().as_micros() as u64),
                        _ => failures += 1,
                    }
                }
                (latencies, failures)
            });
        }
        tokio::time::sleep(Duration::from_secs(seconds)).await;
        stop.store(true, Ordering::Relaxed);
        let (mut all, mut failures) = (Vec::new(), 0);
        while let Some(r) = tasks.join_next().await {
            let (l, f) = r.expect("sender");
            all.extend(l);
            failures += f;
        }
        let elapsed = started.elapsed().as_secs_f64();
        all.sort_unstable();
        let pct = |p: f64| all.get(((all.len() as f64 * p) as usize).min(all.len().saturating_sub(1))).copied().unwrap_or(0);
        println!(
            "{{\"senders\":{senders},\"seconds\":{elapsed:.2},\"acked\":{},\"failures\":{failures},\"msgs_per_s\":{:.0},\"p50_us\":{},\"p99_us\":{},\"p999_us\":{},\"max_us\":{}}}",
            all.len(),
            all.len() as f64 / elapsed,
            pct(0.5),
            pct(0.99),
            pct(0.999),
            all.last().copied().unwrap_or(0)
        );
        for c in clients {
            c.shutdown().await;
        }
    });
}
