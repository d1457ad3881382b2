//! A small load client for the broker: N concurrent senders send messages (1 KiB bodies unless
//! told otherwise) with SEND_MESSAGE_V2 (JSON headers) for a while; prints messages per second
//! and send latency percentiles as JSON. Bounded by time and count.
//!
//! `cargo run --release -p ferromq-broker --example send_load -- <broker addr> <senders> <seconds> [topic] [connections] [body bytes]`
//!
//! Each message carries the properties a Java producer sets (UNIQ_KEY, WAIT, TAGS), so the
//! broker parses and re-encodes what it does for real clients.
//!
//! With `FERROMQ_LOAD_CREDENTIALS=<accessKey>:<secretKey>` every request is signed (brokers
//! with ACL on); each sender's frame is signed once, the broker verifies every copy.
//!
//! The senders are closed-loop slots spread over a few connections: each slot has one request
//! outstanding and sends its next one as soon as the response arrives, exactly as N producer
//! threads calling a synchronous `send` would. One task per connection does the whole exchange
//! (no task, channel, timer or map entry per request), because the client shares the machine
//! with the broker it measures and every microsecond it spends is taken from the broker.
//! `ferromq bench produce` is the full-featured tool that drives the real producer client.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use ferromq_protocol::header::{SendMessageRequestHeader, SendMessageRequestHeaderV2};
use ferromq_protocol::{decode_frame, encode_frame, request_code, response_code, RemotingCommand, SerializeType};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A response that takes longer than this ends the run for its connection (counted as failed).
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(10);
/// No sender records more latencies than this (bounds the client's memory).
const MAX_SENDS_PER_SENDER: usize = 2_000_000;
const MAX_FRAME_BYTES: usize = 16 * 1024 * 1024;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let broker = args.get(1).cloned().unwrap_or_else(|| "127.0.0.1:10911".into());
    let senders: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(64).max(1);
    let seconds: u64 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(5);
    let topic = args.get(4).cloned().unwrap_or_else(|| "LoadTopic".into());
    let connections: usize = args.get(5).and_then(|s| s.parse().ok()).unwrap_or(4).clamp(1, senders);
    let body_bytes: usize = args.get(6).and_then(|s| s.parse().ok()).unwrap_or(1024).min(MAX_FRAME_BYTES / 2);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    rt.block_on(async move {
        let body = Bytes::from(vec![b'x'; body_bytes]);
        let stop = Arc::new(AtomicBool::new(false));
        let mut tasks = tokio::task::JoinSet::new();
        let started = Instant::now();
        for c in 0..connections {
            // Sender s rides on connection s % connections, as before.
            let slots: Vec<usize> = (c..senders).step_by(connections).collect();
            let frames = slots.iter().enumerate().map(|(i, &s)| request_frame(&topic, s, i, body.clone())).collect();
            let (broker, stop) = (broker.clone(), stop.clone());
            tasks.spawn(async move { run_connection(&broker, frames, &stop).await });
        }
        tokio::time::sleep(Duration::from_secs(seconds)).await;
        stop.store(true, Ordering::Relaxed);
        let (mut all, mut failures) = (Vec::new(), 0);
        while let Some(r) = tasks.join_next().await {
            match r.expect("connection task") {
                Ok((l, f)) => {
                    all.extend(l);
                    failures += f;
                }
                Err(e) => {
                    eprintln!("connection failed: {e}");
                    failures += 1;
                }
            }
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
    });
}

/// The encoded request of one sender. Every send of a sender is the same message, and its
/// `opaque` is the sender's slot on the connection (it has one request outstanding at a time),
/// so the frame is encoded once and copied per send.
fn request_frame(topic: &str, sender: usize, slot: usize, body: Bytes) -> Bytes {
    let h: SendMessageRequestHeaderV2 = SendMessageRequestHeader {
        producer_group: "load".into(),
        topic: topic.into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 8,
        queue_id: (sender % 8) as i32,
        born_timestamp: 1,
        // As a Java producer sends them: the client-made message id, WAIT and a tag.
        properties: Some(format!(
            "UNIQ_KEY\u{1}7F00000100002A9F0000000000{sender:06X}\u{2}WAIT\u{1}true\u{2}TAGS\u{1}TagA\u{2}"
        )),
        ..Default::default()
    }
    .into();
    let mut cmd = RemotingCommand::request(request_code::SEND_MESSAGE_V2).with_header(&h).with_body(body);
    cmd.opaque = slot as i32;
    if let Some((ak, sk)) = std::env::var("FERROMQ_LOAD_CREDENTIALS").ok().as_deref().and_then(|c| c.split_once(':')) {
        ferromq_protocol::signature::SessionCredentials::new(ak, sk).sign(&mut cmd);
    }
    let mut out = BytesMut::new();
    encode_frame(&cmd, SerializeType::Json, &mut out).expect("request frame");
    out.freeze()
}

/// Runs the closed loop of `frames.len()` senders over one connection until `stop`, then
/// waits for the outstanding responses. Returns the latencies (µs) of the acknowledged sends
/// and the number of failed ones.
async fn run_connection(addr: &str, frames: Vec<Bytes>, stop: &AtomicBool) -> std::io::Result<(Vec<u64>, u64)> {
    let stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let (mut rd, mut wr) = stream.into_split();
    let now = Instant::now();
    let mut sent_at = vec![now; frames.len()];
    let mut sends = vec![1usize; frames.len()];
    let mut out = BytesMut::with_capacity(64 * 1024);
    for frame in &frames {
        out.extend_from_slice(frame);
    }
    let mut outstanding = frames.len();
    let mut inbuf = BytesMut::with_capacity(64 * 1024);
    let mut latencies = Vec::with_capacity(100_000);
    let mut failures = 0u64;
    while outstanding > 0 {
        if !out.is_empty() {
            wr.write_all(&out).await?;
            out.clear();
        }
        if inbuf.capacity() - inbuf.len() < 16 * 1024 {
            inbuf.reserve(64 * 1024);
        }
        match tokio::time::timeout(RESPONSE_TIMEOUT, rd.read_buf(&mut inbuf)).await {
            Ok(Ok(0)) => {
                return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "broker closed the connection"))
            }
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return Err(e),
            Err(_) => {
                failures += outstanding as u64;
                break;
            }
        }
        let stopping = stop.load(Ordering::Relaxed);
        while let Some(response) = decode_frame(&mut inbuf, MAX_FRAME_BYTES).map_err(std::io::Error::other)? {
            let Some(slot) = usize::try_from(response.opaque).ok().filter(|&s| s < frames.len()) else {
                return Err(std::io::Error::other(format!("response with unknown opaque {}", response.opaque)));
            };
            outstanding -= 1;
            if response.code == response_code::SUCCESS {
                latencies.push(sent_at[slot].elapsed().as_micros() as u64);
            } else {
                failures += 1;
            }
            if !stopping && sends[slot] < MAX_SENDS_PER_SENDER {
                out.extend_from_slice(&frames[slot]);
                sent_at[slot] = Instant::now();
                sends[slot] += 1;
                outstanding += 1;
            }
        }
    }
    Ok((latencies, failures))
}
