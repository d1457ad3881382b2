//! POP load: `ferromq bench pop` pops the topic (queue id -1, 32 per request) as a 5.x consumer
//! group does and acknowledges every message (one ACK_MESSAGE each, as Java's default client),
//! so its rate compares with `consume --from-start` over the same backlog; and `ferromq bench
//! revive` pops N messages without acknowledging them and measures how late after their
//! invisible time each comes back.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferromq_protocol::header::{AckMessageRequestHeader, PopMessageRequestHeader, PopMessageResponseHeader};
use ferromq_protocol::message::StoredMessage;
use ferromq_protocol::pop::{parse_start_offset_info, popped_extra_info, ExtraInfo};
use ferromq_protocol::{request_code, response_code, RemotingCommand};
use ferromq_remoting::RemotingClient;

use crate::histogram::{Histogram, LatencySummary};
use crate::{now_ms, Counters, Options, PullerResult, Target};

/// How long popped messages stay hidden in `bench pop` (long enough never to come back).
const POP_INVISIBLE_MS: i64 = 60_000;

fn pop_request(opts: &Options, invisible_ms: i64, poll_ms: i64) -> RemotingCommand {
    RemotingCommand::request(request_code::POP_MESSAGE).with_header(&PopMessageRequestHeader {
        consumer_group: opts.group.clone(),
        topic: opts.topic.clone(),
        queue_id: -1,
        max_msg_nums: 32,
        invisible_time: invisible_ms,
        poll_time: poll_ms,
        born_time: now_ms() as i64,
        init_mode: 0,
        exp_type: Some("TAG".into()),
        exp: Some("*".into()),
        order: Some(false),
        attempt_id: None,
        broker_name: None,
    })
}

/// The popped messages with their extra info (as the Java client builds it).
fn popped(
    resp: &RemotingCommand,
    broker_name: &str,
) -> Result<(PopMessageResponseHeader, Vec<(StoredMessage, ExtraInfo)>), String> {
    let h: PopMessageResponseHeader = resp.decode_header().map_err(|e| e.to_string())?;
    let starts = parse_start_offset_info(h.start_offset_info.as_deref().unwrap_or("")).map_err(|e| e.to_string())?;
    let msgs = StoredMessage::decode_all(&resp.body).map_err(|e| e.to_string())?;
    let mut out = Vec::with_capacity(msgs.len());
    for m in msgs {
        let extra = popped_extra_info(&h, &starts, broker_name, m.property("POP_CK"), m.queue_id, m.queue_offset)
            .ok_or("no startOffsetInfo for a message")?;
        out.push((m, extra));
    }
    Ok((h, out))
}

fn ack_request(opts: &Options, m: &StoredMessage, extra: &ExtraInfo) -> RemotingCommand {
    RemotingCommand::request(request_code::ACK_MESSAGE).with_header(&AckMessageRequestHeader {
        consumer_group: opts.group.clone(),
        topic: extra.retry_flag.real_topic(&opts.topic, &opts.group),
        queue_id: m.queue_id,
        extra_info: extra.render(),
        offset: m.queue_offset,
        broker_name: None,
    })
}

/// One BATCH_ACK_MESSAGE for a pop's messages: one entry per (queue, checkpoint).
fn batch_ack_request(broker_name: &str, opts: &Options, msgs: &[(StoredMessage, ExtraInfo)]) -> RemotingCommand {
    use ferromq_protocol::body::{BatchAck, BatchAckMessageRequestBody, JsonBody};
    let mut by_ck: std::collections::BTreeMap<(i32, i64, &'static str), (BatchAck, Vec<u32>)> = Default::default();
    for (m, e) in msgs {
        let entry = by_ck.entry((m.queue_id, e.ck_queue_offset, e.retry_flag.as_str())).or_insert_with(|| {
            let ack = BatchAck {
                consumer_group: opts.group.clone(),
                invisible_time: e.invisible_time,
                pop_time: e.pop_time,
                queue_id: m.queue_id,
                retry: e.retry_flag.as_str().to_owned(),
                revive_queue_id: e.revive_qid,
                start_offset: e.ck_queue_offset,
                topic: opts.topic.clone(),
                ..BatchAck::default()
            };
            (ack, Vec::new())
        });
        entry.1.push((m.queue_offset - e.ck_queue_offset) as u32);
    }
    let acks = by_ck
        .into_values()
        .map(|(mut ack, indexes)| {
            ack.set_acked_indexes(&indexes);
            ack
        })
        .collect();
    let body = BatchAckMessageRequestBody { acks, broker_name: Some(broker_name.to_owned()) };
    RemotingCommand::request(request_code::BATCH_ACK_MESSAGE).with_body(body.encode())
}

/// One pop+ack loop until `stop`.
pub(crate) async fn pop_worker(
    client: Arc<RemotingClient>,
    target: Arc<Target>,
    opts: Arc<Options>,
    counters: Arc<Counters>,
    stop: Arc<AtomicBool>,
) -> PullerResult {
    let mut r = PullerResult::default();
    let broker_name = target.broker_name.clone().unwrap_or_default();
    while !stop.load(Ordering::Relaxed) {
        let resp = match client
            .invoke(
                &target.broker_addr,
                pop_request(&opts, POP_INVISIBLE_MS, 500),
                opts.timeout + Duration::from_millis(500),
            )
            .await
        {
            Ok(resp) => resp,
            Err(e) => {
                r.errors += 1;
                counters.error(format!("pop: {e}"));
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        match resp.code {
            response_code::SUCCESS => {}
            response_code::POLLING_TIMEOUT | response_code::PULL_NOT_FOUND => continue,
            c => {
                r.errors += 1;
                counters.error(format!("pop: code {c} {}", resp.remark.unwrap_or_default()));
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        }
        let msgs = match popped(&resp, &broker_name) {
            Ok((_, msgs)) => msgs,
            Err(e) => {
                r.errors += 1;
                counters.error(format!("pop: bad answer: {e}"));
                continue;
            }
        };
        let results = if opts.pop_batch_ack {
            let req = batch_ack_request(&broker_name, &opts, &msgs);
            let result = client.invoke(&target.broker_addr, req, opts.timeout).await;
            let one = result.map(|r| (r.code, r.remark)).map_err(|e| e.to_string());
            msgs.iter().map(|_| one.clone()).collect::<Vec<_>>()
        } else {
            // The acks of one pop in flight together, as an application acking as it goes.
            let acks = msgs
                .iter()
                .map(|(m, extra)| client.invoke(&target.broker_addr, ack_request(&opts, m, extra), opts.timeout));
            futures_join_all(acks)
                .await
                .into_iter()
                .map(|r| r.map(|r| (r.code, r.remark)).map_err(|e| e.to_string()))
                .collect()
        };
        let now = now_ms() as i64;
        for ((m, _), result) in msgs.iter().zip(results) {
            match result {
                Ok((code, _)) if code == response_code::SUCCESS => {
                    r.consumed += 1;
                    r.bytes += m.body.len() as u64;
                    r.latency.record(now.saturating_sub(m.born_timestamp_ms).max(0) as u64);
                    r.last_received = Some(Instant::now());
                    counters.consumed.fetch_add(1, Ordering::Relaxed);
                }
                Ok((code, remark)) => {
                    r.errors += 1;
                    counters.error(format!("ack: code {code} {}", remark.unwrap_or_default()));
                }
                Err(e) => {
                    r.errors += 1;
                    counters.error(format!("ack: {e}"));
                }
            }
        }
        if opts.count > 0 && counters.consumed.load(Ordering::Relaxed) >= opts.count {
            stop.store(true, Ordering::Relaxed);
        }
    }
    r
}

/// Runs the futures concurrently and returns their outputs in order (no extra dependency).
async fn futures_join_all<F: std::future::Future>(futures: impl IntoIterator<Item = F>) -> Vec<F::Output> {
    let mut pinned: Vec<std::pin::Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
    let mut out: Vec<Option<F::Output>> = (0..pinned.len()).map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (i, f) in pinned.iter_mut().enumerate() {
            if out[i].is_none() {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => out[i] = Some(v),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    out.into_iter().map(|v| v.expect("every future completed")).collect()
}

/// What `bench revive` measured.
#[derive(Debug, Clone)]
pub struct ReviveReport {
    /// Messages popped and left unacknowledged.
    pub popped: u64,
    /// Of those, back within the time limit.
    pub returned: u64,
    /// How long after `popTime + invisibleTime` each came back, ms.
    pub lateness_ms: LatencySummary,
    /// The first failure seen.
    pub first_error: Option<String>,
}

/// Pops up to `messages` of the topic's backlog with `invisible` and no ack, then pops until
/// every one is back (acknowledging them now) or `limit` passes.
///
/// # Errors
/// When no broker serves the topic.
pub async fn revive_lateness(
    opts: Options,
    messages: u64,
    invisible: Duration,
    limit: Duration,
) -> Result<ReviveReport, crate::BenchError> {
    opts.validate()?;
    let client = Arc::new(RemotingClient::new(opts.client_config()));
    let target = crate::resolve(&client, &opts).await?;
    let broker_name = target.broker_name.clone().unwrap_or_default();
    let invisible_ms = invisible.as_millis() as i64;
    let mut due: std::collections::HashSet<(i32, i64)> = std::collections::HashSet::new();
    let mut first_error = None;
    let started = Instant::now();
    // Phase 1: take the messages and let them go invisible.
    while (due.len() as u64) < messages && started.elapsed() < limit {
        let resp = match client
            .invoke(
                &target.broker_addr,
                pop_request(&opts, invisible_ms, 200),
                opts.timeout + Duration::from_millis(500),
            )
            .await
        {
            Ok(r) => r,
            Err(e) => {
                first_error.get_or_insert(format!("pop: {e}"));
                continue;
            }
        };
        if resp.code != response_code::SUCCESS {
            if resp.code == response_code::POLLING_TIMEOUT {
                break; // the backlog is exhausted
            }
            first_error.get_or_insert(format!("pop: code {} {}", resp.code, resp.remark.clone().unwrap_or_default()));
            continue;
        }
        match popped(&resp, &broker_name) {
            Ok((_, msgs)) => {
                for (m, _) in msgs {
                    due.insert((m.queue_id, m.queue_offset));
                }
            }
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    let popped_n = due.len() as u64;
    // Phase 2: they come back through the retry topic, with reconsume times 1 and the first
    // pop's time in 1ST_POP_TIME; a long-polling pop is woken as soon as one is put back.
    let mut histogram = Histogram::new();
    let mut returned = 0u64;
    while returned < popped_n && started.elapsed() < limit {
        let resp = match client
            .invoke(
                &target.broker_addr,
                pop_request(&opts, 600_000, 1_000),
                opts.timeout + Duration::from_millis(1_500),
            )
            .await
        {
            Ok(r) => r,
            Err(e) => {
                first_error.get_or_insert(format!("pop: {e}"));
                continue;
            }
        };
        if resp.code != response_code::SUCCESS {
            continue;
        }
        let now = now_ms() as i64;
        let Ok((_, msgs)) = popped(&resp, &broker_name) else { continue };
        for (m, extra) in msgs {
            if m.reconsume_times >= 1 {
                let first_pop: Option<i64> = m.property("1ST_POP_TIME").and_then(|t| t.parse().ok());
                if let Some(first_pop) = first_pop {
                    histogram.record(now.saturating_sub(first_pop + invisible_ms).max(0) as u64);
                    returned += 1;
                }
            }
            // Not acknowledged: popped again with a 10-minute invisible time, it stays out of
            // the way for the rest of the run (acking 100k one by one would be the bench's
            // own bottleneck).
            let _ = extra;
        }
    }
    client.shutdown().await;
    Ok(ReviveReport { popped: popped_n, returned, lateness_ms: histogram.summary(), first_error })
}
