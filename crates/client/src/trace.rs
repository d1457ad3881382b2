//! Message trace (`enableMsgTrace`): producers and push consumers record what happened to each
//! message as Java's clients do (`Pub`, `SubBefore`, `SubAfter` records,
//! `ferromq_protocol::trace`), and a dispatcher sends them in batches to the trace topic
//! with a producer of its own, where mqadmin's `queryMsgTraceById` and the dashboard find them
//! by message id. Java: `AsyncTraceDispatcher`, `SendMessageTraceHookImpl`,
//! `ConsumeMessageTraceHookImpl`.
//!
//! Tracing never slows or fails the traced calls: records go through a bounded queue, and
//! when it is full (the trace topic unreachable, say) they are dropped and counted, as Java
//! drops them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferromq_protocol::message::{keys, MessageProperties, UniqIdGenerator};
use ferromq_protocol::trace::{
    msg_type, trace_keys, SubAfter, SubBefore, TraceRecord, MAX_TRACE_MESSAGE_BYTES, RMQ_SYS_TRACE_TOPIC,
};
use tokio::sync::mpsc;
use tracing::{debug, warn};

use crate::client_instance::ClientConfig;
use crate::message::Message;
use crate::message_ext::MessageExt;
use crate::producer::{Producer, ProducerConfig};

/// Records waiting to be sent (Java: `queueSize`, 2048).
pub const TRACE_QUEUE: usize = 2048;

/// The region of a message without `MSG_REGION` (the broker's default `regionId`).
pub(crate) const DEFAULT_REGION: &str = "DefaultRegion";

fn epoch_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// How long records wait to be batched before they are sent.
const FLUSH_EVERY: Duration = Duration::from_millis(200);

/// What the dispatcher's task is handed.
#[derive(Debug)]
enum Item {
    Record(Box<TraceRecord>),
    /// Send what is queued and stop.
    Stop,
}

/// Sends trace records to the trace topic.
#[derive(Debug)]
pub(crate) struct TraceDispatcher {
    tx: mpsc::Sender<Item>,
    dropped: AtomicU64,
    /// Request ids pairing a listener call's SubBefore and SubAfter records.
    request_ids: UniqIdGenerator,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl TraceDispatcher {
    /// A dispatcher for the client `group` (`kind`: `PRODUCE` or `CONSUME`), sending to
    /// `trace_topic` (default `RMQ_SYS_TRACE_TOPIC`) through a producer of its own made from
    /// `client`.
    pub(crate) fn start(client: &ClientConfig, group: &str, kind: &str, trace_topic: Option<&str>) -> Arc<Self> {
        let topic = trace_topic.filter(|t| !t.trim().is_empty()).unwrap_or(RMQ_SYS_TRACE_TOPIC).to_owned();
        let config = ClientConfig {
            // Its own client id: its heartbeats and connections are not the traced client's.
            instance_name: format!("PID_CLIENT_INNER_TRACE_PRODUCER#{}", client.instance_name),
            ..client.clone()
        };
        let producer = Producer::new(
            ProducerConfig { group: format!("_INNER_TRACE_PRODUCER-{group}-{kind}"), ..ProducerConfig::default() },
            config,
        );
        let (tx, rx) = mpsc::channel(TRACE_QUEUE);
        let task = tokio::spawn(run(producer, topic, rx));
        Arc::new(TraceDispatcher {
            tx,
            dropped: AtomicU64::new(0),
            request_ids: UniqIdGenerator::without_ip(),
            task: Mutex::new(Some(task)),
        })
    }

    /// Queues `record`; drops it when the queue is full.
    pub(crate) fn append(&self, record: TraceRecord) {
        if self.tx.try_send(Item::Record(Box::new(record))).is_err() {
            let dropped = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            if dropped.is_power_of_two() {
                warn!(dropped, queue = TRACE_QUEUE, "trace records dropped: the trace queue is full");
            }
        }
    }

    /// Records the `SubBefore` of each message handed to a listener call of `group`; returns
    /// the call's request id.
    pub(crate) fn before(&self, group: &str, msgs: &[MessageExt]) -> String {
        let request_id = self.request_ids.next_id();
        let now = epoch_ms();
        for m in msgs {
            self.append(TraceRecord::SubBefore(SubBefore {
                timestamp: now,
                region_id: m.property(keys::MSG_REGION).unwrap_or(DEFAULT_REGION).to_owned(),
                group: group.to_owned(),
                request_id: request_id.clone(),
                msg_id: m.msg_id(),
                retry_times: m.reconsume_times(),
                keys: m.property(keys::KEYS).map(str::to_owned),
            }));
        }
        request_id
    }

    /// Records the `SubAfter` of each message of `group`'s listener call `request_id`, which
    /// took `cost` and ended with `context_code`.
    pub(crate) fn after(&self, group: &str, request_id: &str, msgs: &[MessageExt], cost: Duration, context_code: i32) {
        let now = epoch_ms();
        for m in msgs {
            self.append(TraceRecord::SubAfter(SubAfter {
                request_id: request_id.to_owned(),
                msg_id: m.msg_id(),
                cost_time: cost.as_millis() as i64,
                success: context_code == ferromq_protocol::trace::context_code::SUCCESS,
                keys: m.property(keys::KEYS).map(str::to_owned),
                context_code,
                timestamp: Some(now),
                group: Some(group.to_owned()),
            }));
        }
    }

    /// Sends what is queued and stops (waiting at most 5 s).
    pub(crate) async fn shutdown(&self) {
        let task = self.task.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(task) = task {
            let _ = self.tx.send(Item::Stop).await;
            if tokio::time::timeout(Duration::from_secs(5), task).await.is_err() {
                warn!("trace records still unsent at shutdown were dropped");
            }
        }
    }
}

/// Batches records and sends them, until told to stop.
async fn run(producer: Producer, topic: String, mut rx: mpsc::Receiver<Item>) {
    if let Err(e) = producer.start().await {
        warn!(error = %e, "trace producer did not start; trace records are dropped");
    }
    let mut batch: Vec<TraceRecord> = Vec::new();
    let mut bytes = 0;
    loop {
        let next = if batch.is_empty() {
            rx.recv().await
        } else {
            match tokio::time::timeout(FLUSH_EVERY, rx.recv()).await {
                Ok(r) => r,
                Err(_) => {
                    flush(&producer, &topic, &mut batch).await;
                    bytes = 0;
                    continue;
                }
            }
        };
        let Some(Item::Record(record)) = next else { break };
        let record = *record;
        let text = record.encode();
        if bytes + text.len() > MAX_TRACE_MESSAGE_BYTES && !batch.is_empty() {
            flush(&producer, &topic, &mut batch).await;
            bytes = 0;
        }
        bytes += text.len();
        batch.push(record);
    }
    flush(&producer, &topic, &mut batch).await;
    producer.shutdown().await;
}

async fn flush(producer: &Producer, topic: &str, batch: &mut Vec<TraceRecord>) {
    if batch.is_empty() {
        return;
    }
    let body: String = batch.iter().map(TraceRecord::encode).collect();
    let keys = trace_keys(batch.iter());
    let msg = Message::new(topic, body.into_bytes()).with_keys(keys.split(' '));
    match producer.send(msg).await {
        Ok(r) => debug!(records = batch.len(), msg_id = %r.msg_id, "trace records sent"),
        Err(e) => warn!(records = batch.len(), topic, error = %e, "trace records not sent"),
    }
    batch.clear();
}

/// The trace message type of a message about to be sent (Java: `sendKernelImpl`'s choice).
pub(crate) fn pub_msg_type(properties: &MessageProperties) -> i32 {
    if properties.get(keys::TRAN_MSG).is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        msg_type::TRANS_HALF
    } else if keys::asks_for_delay(properties) {
        msg_type::DELAY
    } else {
        msg_type::NORMAL
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pub_records_type_messages_as_javas_producer_does() {
        let with = |pairs: &[(&str, &str)]| {
            let mut p = MessageProperties::default();
            for (k, v) in pairs {
                p.insert(*k, *v);
            }
            pub_msg_type(&p)
        };
        assert_eq!(with(&[]), msg_type::NORMAL);
        assert_eq!(with(&[(keys::TRAN_MSG, "true")]), msg_type::TRANS_HALF);
        assert_eq!(with(&[(keys::DELAY, "3")]), msg_type::DELAY);
        assert_eq!(with(&[(keys::START_DELIVER_TIME, "1700000000000")]), msg_type::DELAY);
        assert_eq!(with(&[(keys::DELAY, "0")]), msg_type::NORMAL);
    }
}
