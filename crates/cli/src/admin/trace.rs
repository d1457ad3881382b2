//! `queryMsgTraceById`: finds the trace messages of one message in the trace topic (they are
//! indexed under the traced message's id as a key: QUERY_MESSAGE by key on every broker of the
//! trace topic) and prints its send and consume records as mqadmin does. Decoding the records
//! is `ferromq_protocol::trace_view`'s job. Java: `tools/command/message/QueryMsgTraceByIdSubCommand`.

use anyhow::Context;
use ferromq_client::admin::{json, JsonValue};
use ferromq_protocol::topic_validator::RMQ_SYS_TRACE_TOPIC;

use crate::admin::output::{human_time_ms, print_json};
use crate::admin::Ctx;
use ferromq_protocol::trace_view::{decode_records, TraceKind, TraceView};

#[derive(Debug, clap::Args)]
pub(crate) struct QueryMsgTraceByIdArgs {
    /// The traced message's id (its unique id, as producers print it).
    #[arg(short = 'i', long = "msgId")]
    msg_id: String,
    /// The trace topic.
    #[arg(short = 't', long = "traceTopic", default_value = RMQ_SYS_TRACE_TOPIC)]
    trace_topic: String,
    /// Earliest store time of the trace messages, ms since the epoch.
    #[arg(short = 'b', long = "beginTimestamp", default_value_t = 0)]
    begin: i64,
    /// Latest store time of the trace messages, ms since the epoch.
    #[arg(short = 'e', long = "endTimestamp", default_value_t = i64::MAX)]
    end: i64,
    /// Most trace messages to read per broker.
    #[arg(short = 'c', long = "maxNum", default_value_t = 64)]
    max_num: i32,
}

/// A record of the traced message and the host of the client that wrote it.
struct HostView {
    record: TraceView,
    client_host: String,
}

pub(crate) async fn query_msg_trace_by_id(ctx: &Ctx, a: QueryMsgTraceByIdArgs) -> anyhow::Result<()> {
    let msg_id = a.msg_id.trim();
    if msg_id.is_empty() {
        anyhow::bail!("give the message id with -i");
    }
    let found =
        ctx.client.trace_messages(&a.trace_topic, msg_id, a.max_num, (a.begin, a.end)).await.with_context(|| {
            format!("no route for trace topic {} (is traceTopicEnable=true on the brokers?)", a.trace_topic)
        })?;
    if found.is_empty() {
        anyhow::bail!("no trace of message {msg_id} in trace topic {}", a.trace_topic);
    }
    let mut views = Vec::new();
    for (addr, m) in &found {
        let (records, errors) = decode_records(&String::from_utf8_lossy(&m.body));
        for e in errors {
            eprintln!("queryMsgTraceById: trace message {} on {addr}: {e}", m.offset_msg_id());
        }
        // Java's `getBornHostString`: the writer's IP without the port.
        let client_host = m.born_host.ip().to_string();
        views.extend(
            records
                .into_iter()
                .filter(|r| r.msg_id == msg_id)
                .map(|record| HostView { record, client_host: client_host.clone() }),
        );
    }
    if ctx.json {
        let items: Vec<JsonValue> = views.iter().map(view_json).collect();
        return print_json(&json!(items));
    }
    print_views(&views);
    Ok(())
}

/// mqadmin's layout: each Pub record under its own header, then the SubAfter records grouped
/// by consumer group (groups in the order they first appear), each group under a header.
fn print_views(views: &[HostView]) {
    let line = |cells: [&str; 6]| {
        let text = format!(
            "{:<10} {:<20} {:<20} {:<20} {:<10} {:<10}",
            cells[0], cells[1], cells[2], cells[3], cells[4], cells[5]
        );
        println!("{}", text.trim_end());
    };
    let row = |kind: &str, v: &HostView| {
        let r = &v.record;
        line([
            kind,
            r.group.as_deref().unwrap_or("null"),
            &v.client_host,
            &seconds_time(r.timestamp_ms),
            &format!("{}ms", r.cost_time_ms),
            r.status(),
        ]);
    };
    for v in views.iter().filter(|v| v.record.kind == TraceKind::Pub) {
        line(["#Type", "#ProducerGroup", "#ClientHost", "#SendTime", "#CostTimes", "#Status"]);
        row("Pub", v);
        println!();
    }
    let mut groups: Vec<Option<&str>> = Vec::new();
    for v in views.iter().filter(|v| v.record.kind == TraceKind::SubAfter) {
        if !groups.contains(&v.record.group.as_deref()) {
            groups.push(v.record.group.as_deref());
        }
    }
    for group in groups {
        line(["#Type", "#ConsumerGroup", "#ClientHost", "#ConsumerTime", "#CostTimes", "#Status"]);
        for v in views.iter().filter(|v| v.record.kind == TraceKind::SubAfter && v.record.group.as_deref() == group) {
            row("Sub", v);
        }
        println!();
    }
}

/// `yyyy-MM-dd HH:mm:ss` (UTC; Java uses the JVM's time zone).
fn seconds_time(ms: i64) -> String {
    let mut text = human_time_ms(ms);
    text.truncate("yyyy-MM-dd HH:mm:ss".len());
    text
}

fn view_json(v: &HostView) -> JsonValue {
    let r = &v.record;
    json!({
        "type": r.kind.name(),
        "timestamp": r.timestamp_ms,
        "regionId": r.region_id,
        "groupName": r.group,
        "requestId": r.request_id,
        "topic": r.topic,
        "msgId": r.msg_id,
        "tags": r.tags,
        "keys": r.keys,
        "storeHost": r.store_host,
        "clientHost": v.client_host,
        "bodyLength": r.body_length,
        "costTime": r.cost_time_ms,
        "msgType": r.msg_type,
        "offsetMsgId": r.offset_msg_id,
        "status": r.status(),
        "retryTimes": r.retry_times,
        "contextCode": r.context_code,
        "transactionId": r.transaction_id,
        "transactionState": r.transaction_state,
        "fromTransactionCheck": r.from_transaction_check,
    })
}
