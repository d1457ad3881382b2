//! Browsing a topic's messages over a time range: printMsg (every queue of the topic) and
//! printMsgByQueue (one queue, optionally counting tags). Both find each queue's first and
//! last offset (SEARCH_OFFSET_BY_TIMESTAMP for -b/-e), then pull in batches without
//! committing offsets. Java: `tools/command/message/PrintMessageSubCommand`,
//! `PrintMessageByQueueCommand`.

use std::collections::BTreeMap;

use anyhow::Context;
use ferromq_client::admin::{json, JsonValue, PullStatus, TOOLS_CONSUMER_GROUP};
use ferromq_client::MessageQueue;
use ferromq_protocol::message::{keys, StoredMessage};

use crate::admin::output::{parse_timestamp, print_json};
use crate::admin::Ctx;

/// Messages one pull asks for (Java's tools pull 32).
const PULL_BATCH_MAX: i64 = 32;
/// printMsg reports its message count on stderr every this many messages.
const PROGRESS_EVERY_MESSAGES: usize = 1000;
/// The line printMsg prints after each queue.
const QUEUE_SEPARATOR: &str = "--------------------------------------------------------";

#[derive(Debug, clap::Args)]
pub(crate) struct PrintMsgArgs {
    /// Topic name.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// Charset of the bodies: UTF-8 (default), ISO-8859-1 or US-ASCII.
    #[arg(short = 'c', long = "charsetName", default_value = "UTF-8")]
    charset: String,
    /// Tag expression, e.g. `TagA || TagB`.
    #[arg(short = 's', long = "subExpression", default_value = "*")]
    sub_expression: String,
    /// Begin timestamp: ms since the epoch or yyyy-MM-dd#HH:mm:ss:SSS (UTC).
    #[arg(short = 'b', long = "beginTimestamp")]
    begin: Option<String>,
    /// End timestamp: ms since the epoch or yyyy-MM-dd#HH:mm:ss:SSS (UTC).
    #[arg(short = 'e', long = "endTimestamp")]
    end: Option<String>,
    /// Print the bodies (true, the default, or false).
    #[arg(short = 'd', long = "printBody", default_value = "true", action = clap::ArgAction::Set, value_parser = clap::builder::BoolishValueParser::new())]
    print_body: bool,
    /// LMQ parent topic: its route gives the brokers of an LMQ topic.
    #[arg(short = 'l', long = "lmqParentTopic")]
    lmq_parent_topic: Option<String>,
}

#[derive(Debug, clap::Args)]
pub(crate) struct PrintMsgByQueueArgs {
    /// Topic name.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// Broker name.
    #[arg(short = 'a', long = "brokerName")]
    broker_name: String,
    /// Queue id.
    #[arg(short = 'i', long = "queueId")]
    queue_id: i32,
    /// Charset of the bodies: UTF-8 (default), ISO-8859-1 or US-ASCII.
    #[arg(short = 'c', long = "charsetName", default_value = "UTF-8")]
    charset: String,
    /// Tag expression, e.g. `TagA || TagB`.
    #[arg(short = 's', long = "subExpression", default_value = "*")]
    sub_expression: String,
    /// Begin timestamp: ms since the epoch or yyyy-MM-dd#HH:mm:ss:SSS (UTC).
    #[arg(short = 'b', long = "beginTimestamp")]
    begin: Option<String>,
    /// End timestamp: ms since the epoch or yyyy-MM-dd#HH:mm:ss:SSS (UTC).
    #[arg(short = 'e', long = "endTimestamp")]
    end: Option<String>,
    /// Print the messages (true or false, the default).
    #[arg(short = 'p', long = "printMsg", default_value = "false", action = clap::ArgAction::Set, value_parser = clap::builder::BoolishValueParser::new())]
    print_msg: bool,
    /// With -p: print the bodies too (true or false, the default).
    #[arg(short = 'd', long = "printBody", default_value = "false", action = clap::ArgAction::Set, value_parser = clap::builder::BoolishValueParser::new())]
    print_body: bool,
    /// Count the messages by tag (true or false, the default).
    #[arg(short = 'f', long = "calculate", default_value = "false", action = clap::ArgAction::Set, value_parser = clap::builder::BoolishValueParser::new())]
    calculate_by_tag: bool,
}

/// One queue to read, where, and the offsets to read between.
struct QueueRange {
    mq: MessageQueue,
    addr: String,
    min_offset: i64,
    max_offset: i64,
}

/// How reading one queue ended (printMsg prints it after the queue's messages).
struct QueueEnd {
    status: PullStatus,
    next_offset: i64,
}

pub(crate) async fn print_msg(ctx: &Ctx, a: PrintMsgArgs) -> anyhow::Result<()> {
    let charset = Charset::parse(&a.charset)?;
    let (begin, end) = (timestamp_arg(a.begin.as_deref(), "-b")?, timestamp_arg(a.end.as_deref(), "-e")?);
    let route_topic = a.lmq_parent_topic.as_deref().unwrap_or(&a.topic);
    let route =
        ctx.client.topic_route(route_topic).await.with_context(|| format!("no route for topic {route_topic}"))?;
    let queues = route.subscribe_queues(&a.topic);
    if queues.is_empty() {
        anyhow::bail!("topic {} has no readable queue", a.topic);
    }
    let print = QueuePrint { charset, print_body: a.print_body, expression: &a.sub_expression, begin, end };
    let mut failed = Vec::new();
    let mut printed = 0usize;
    let mut json_queues = Vec::new();
    for (i, (mq, addr)) in queues.iter().enumerate() {
        eprintln!("printMsg: queue {}/{} {}", i + 1, queues.len(), mq_string(mq));
        // As mqadmin, a queue that cannot be read does not stop the others.
        match print_queue(ctx, &print, mq, addr, &mut printed).await {
            Ok(queue_json) => json_queues.extend(queue_json),
            Err(e) => {
                eprintln!("printMsg: cannot read {}: {e:#}", mq_string(mq));
                failed.push(mq_string(mq));
            }
        }
    }
    eprintln!("printMsg: {printed} messages from {} queues", queues.len());
    if ctx.json {
        print_json(&json!(json_queues))?;
    }
    if !failed.is_empty() {
        anyhow::bail!("{} of {} queues could not be read: {}", failed.len(), queues.len(), failed.join(", "));
    }
    Ok(())
}

/// What printMsg does with each queue.
struct QueuePrint<'a> {
    charset: Charset,
    print_body: bool,
    expression: &'a str,
    begin: Option<i64>,
    end: Option<i64>,
}

/// Prints one queue's messages as printMsg does (or, with --json, returns them), counting
/// them in `printed` and reporting the count on stderr now and then.
async fn print_queue(
    ctx: &Ctx,
    p: &QueuePrint<'_>,
    mq: &MessageQueue,
    addr: &str,
    printed: &mut usize,
) -> anyhow::Result<Option<JsonValue>> {
    let range = queue_range(ctx, mq, addr, p.begin, p.end).await?;
    if !ctx.json {
        println!("minOffset={}, maxOffset={}, {}", range.min_offset, range.max_offset, mq_string(mq));
    }
    let mut messages = Vec::new();
    let end = read_queue(ctx, &range, p.expression, |batch| match batch {
        Batch::Found { messages: found, min_offset, max_offset } => {
            for m in found {
                *printed += 1;
                if printed.is_multiple_of(PROGRESS_EVERY_MESSAGES) {
                    eprintln!("printMsg: {printed} messages");
                }
                if ctx.json {
                    messages.push(message_json(&mq.broker_name, &m, p.charset, p.print_body));
                } else {
                    println!(
                        "{}",
                        java_message_line(&mq.broker_name, &m, (min_offset, max_offset), p.charset, p.print_body)
                    );
                }
            }
        }
        Batch::NoMatch { next_offset } if !ctx.json => {
            println!("{} no matched msg. status=NO_MATCHED_MSG, offset={next_offset}", mq_string(mq));
        }
        Batch::NoMatch { .. } => {}
    })
    .await?;
    if ctx.json {
        return Ok(Some(json!({ "topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id,
            "minOffset": range.min_offset, "maxOffset": range.max_offset, "messages": messages })));
    }
    if let Some(end) = end {
        let status = pull_status_name(end.status);
        println!("{} print msg finished. status={status}, offset={}", mq_string(mq), end.next_offset);
    }
    println!("{QUEUE_SEPARATOR}");
    Ok(None)
}

pub(crate) async fn print_msg_by_queue(ctx: &Ctx, a: PrintMsgByQueueArgs) -> anyhow::Result<()> {
    let charset = Charset::parse(&a.charset)?;
    let (begin, end) = (timestamp_arg(a.begin.as_deref(), "-b")?, timestamp_arg(a.end.as_deref(), "-e")?);
    let route = ctx.client.topic_route(&a.topic).await.with_context(|| format!("no route for topic {}", a.topic))?;
    let (mq, addr) = route
        .subscribe_queues(&a.topic)
        .into_iter()
        .find(|(mq, _)| mq.broker_name == a.broker_name && mq.queue_id == a.queue_id)
        .with_context(|| {
            format!("topic {} has no readable queue {} on broker {}", a.topic, a.queue_id, a.broker_name)
        })?;
    let range = queue_range(ctx, &mq, &addr, begin, end).await?;
    let mut tag_counts: BTreeMap<String, u64> = BTreeMap::new();
    let mut messages = Vec::new();
    read_queue(ctx, &range, &a.sub_expression, |batch| {
        let Batch::Found { messages: found, min_offset, max_offset } = batch else { return };
        for m in found {
            if a.calculate_by_tag {
                if let Some(tag) = m.property(keys::TAGS).filter(|t| !t.trim().is_empty()) {
                    *tag_counts.entry(tag.to_owned()).or_default() += 1;
                }
            }
            if !a.print_msg {
                continue;
            }
            if ctx.json {
                messages.push(message_json(&mq.broker_name, &m, charset, a.print_body));
            } else {
                println!("{}", java_message_line(&mq.broker_name, &m, (min_offset, max_offset), charset, a.print_body));
            }
        }
    })
    .await?;
    // Most frequent first, as Java sorts; equal counts by tag so the order is stable.
    let mut counts: Vec<(String, u64)> = tag_counts.into_iter().collect();
    counts.sort_by(|x, y| y.1.cmp(&x.1).then_with(|| x.0.cmp(&y.0)));
    if ctx.json {
        let tags: Vec<JsonValue> = counts.iter().map(|(t, c)| json!({ "tag": t, "count": c })).collect();
        return print_json(&json!({ "topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id,
            "minOffset": range.min_offset, "maxOffset": range.max_offset, "messages": messages, "tagCounts": tags }));
    }
    for (tag, count) in counts.iter().filter(|_| a.calculate_by_tag) {
        println!("Tag: {tag:<30} Count: {count}");
    }
    Ok(())
}

/// The offsets to read a queue between: its minimum and maximum, or the first message stored
/// at or after -b and -e.
async fn queue_range(
    ctx: &Ctx,
    mq: &MessageQueue,
    addr: &str,
    begin: Option<i64>,
    end: Option<i64>,
) -> anyhow::Result<QueueRange> {
    let min_offset = match begin {
        Some(ms) => ctx.client.search_offset(addr, mq, ms).await?,
        None => ctx.client.min_offset(addr, mq).await?,
    };
    let max_offset = match end {
        Some(ms) => ctx.client.search_offset(addr, mq, ms).await?,
        None => ctx.client.max_offset(addr, mq).await?,
    };
    Ok(QueueRange { mq: mq.clone(), addr: addr.to_owned(), min_offset, max_offset })
}

/// What one pull of a queue gave.
enum Batch {
    /// Messages, with the queue's min and max offset as the broker reported them.
    Found { messages: Vec<StoredMessage>, min_offset: i64, max_offset: i64 },
    /// None matched the tag expression; reading goes on from `next_offset`.
    NoMatch { next_offset: i64 },
}

/// Pulls `range` batch by batch and hands each batch to `on_batch`. Messages at or past the
/// range's end are not handed over (a pull may return more). Ends at the range's end, on
/// NO_NEW_MSG or OFFSET_ILLEGAL (returned), or when the broker does not move the offset on.
async fn read_queue(
    ctx: &Ctx,
    range: &QueueRange,
    expression: &str,
    mut on_batch: impl FnMut(Batch),
) -> anyhow::Result<Option<QueueEnd>> {
    let mut offset = range.min_offset;
    while offset < range.max_offset {
        let want = i32::try_from((range.max_offset - offset).min(PULL_BATCH_MAX)).unwrap_or(1);
        let result = ctx
            .client
            .pull_message_by_tag(&range.addr, TOOLS_CONSUMER_GROUP, &range.mq, expression, offset, want)
            .await?;
        let next = result.next_begin_offset;
        match result.status {
            PullStatus::Found => {
                let messages = result.messages.into_iter().filter(|m| m.queue_offset < range.max_offset).collect();
                on_batch(Batch::Found { messages, min_offset: result.min_offset, max_offset: result.max_offset });
            }
            PullStatus::NoMatchedMessage => on_batch(Batch::NoMatch { next_offset: next }),
            PullStatus::NoNewMessage | PullStatus::OffsetIllegal => {
                return Ok(Some(QueueEnd { status: result.status, next_offset: next }));
            }
        }
        if next <= offset {
            // The broker did not move on: reading further would loop.
            return Ok(Some(QueueEnd { status: result.status, next_offset: next }));
        }
        offset = next;
    }
    Ok(None)
}

/// Java's `PullStatus` names.
fn pull_status_name(status: PullStatus) -> &'static str {
    match status {
        PullStatus::Found => "FOUND",
        PullStatus::NoNewMessage => "NO_NEW_MSG",
        PullStatus::NoMatchedMessage => "NO_MATCHED_MSG",
        PullStatus::OffsetIllegal => "OFFSET_ILLEGAL",
    }
}

/// A -b/-e value as ms since the epoch.
fn timestamp_arg(text: Option<&str>, flag: &str) -> anyhow::Result<Option<i64>> {
    text.map(|t| {
        parse_timestamp(t.trim())
            .with_context(|| format!("{flag} {t:?} is neither ms since the epoch nor yyyy-MM-dd#HH:mm:ss:SSS"))
    })
    .transpose()
}

/// Java's `MessageQueue#toString`.
pub(crate) fn mq_string(mq: &MessageQueue) -> String {
    format!("MessageQueue [topic={}, brokerName={}, queueId={}]", mq.topic, mq.broker_name, mq.queue_id)
}

/// The charsets bodies can be printed in without a conversion table.
#[derive(Debug, Clone, Copy)]
enum Charset {
    Utf8,
    Latin1,
    Ascii,
}

impl Charset {
    fn parse(name: &str) -> anyhow::Result<Self> {
        match name.trim().to_ascii_uppercase().replace('_', "-").as_str() {
            "UTF-8" | "UTF8" => Ok(Charset::Utf8),
            "ISO-8859-1" | "ISO8859-1" | "LATIN1" => Ok(Charset::Latin1),
            "US-ASCII" | "ASCII" => Ok(Charset::Ascii),
            _ => anyhow::bail!("charset {name} is not supported: use UTF-8, ISO-8859-1 or US-ASCII"),
        }
    }

    /// The body as text; bytes the charset cannot map become U+FFFD, as Java's decoder does.
    fn decode(self, body: &[u8]) -> String {
        match self {
            Charset::Utf8 => String::from_utf8_lossy(body).into_owned(),
            Charset::Latin1 => body.iter().map(|b| char::from(*b)).collect(),
            Charset::Ascii => body.iter().map(|b| if b.is_ascii() { char::from(*b) } else { '\u{FFFD}' }).collect(),
        }
    }
}

/// One message as mqadmin prints it: `MSGID: <id> MessageExt [...] BODY: <body>`, the
/// `MessageExt` part as Java's `toString` writes it for a pulled message (the pull adds the
/// queue's MIN_OFFSET and MAX_OFFSET properties).
fn java_message_line(
    broker_name: &str,
    m: &StoredMessage,
    (min_offset, max_offset): (i64, i64),
    charset: Charset,
    print_body: bool,
) -> String {
    let offset_id = m.offset_msg_id();
    let msg_id = m.property(keys::UNIQ_KEY).map_or_else(|| offset_id.clone(), str::to_owned);
    let mut properties: Vec<String> = m.properties_map().iter().map(|(k, v)| format!("{k}={v}")).collect();
    properties.push(format!("{}={min_offset}", keys::MIN_OFFSET));
    properties.push(format!("{}={max_offset}", keys::MAX_OFFSET));
    // Java keeps a prepared transactional message's UNIQ_KEY as its transaction id.
    let transaction_id = match m.property(keys::TRAN_MSG) {
        Some(flag) if flag.eq_ignore_ascii_case("true") => m.property(keys::UNIQ_KEY).unwrap_or("null"),
        _ => "null",
    };
    let body_bytes: Vec<String> = m.body.iter().map(|b| i8::from_ne_bytes([*b]).to_string()).collect();
    let body = if print_body { charset.decode(&m.body) } else { "NOT PRINT BODY".to_owned() };
    format!(
        "MSGID: {msg_id} MessageExt [brokerName={broker_name}, queueId={}, storeSize={}, queueOffset={}, \
         sysFlag={}, bornTimestamp={}, bornHost=/{}, storeTimestamp={}, storeHost=/{}, msgId={offset_id}, \
         commitLogOffset={}, bodyCRC={}, reconsumeTimes={}, preparedTransactionOffset={}, \
         toString()=Message{{topic='{}', flag={}, properties={{{}}}, body=[{}], transactionId='{transaction_id}'}}] \
         BODY: {body}",
        m.queue_id,
        m.encoded_len(),
        m.queue_offset,
        m.sys_flag,
        m.born_timestamp_ms,
        m.born_host,
        m.store_timestamp_ms,
        m.store_host,
        m.physical_offset,
        m.body_crc.unwrap_or(0),
        m.reconsume_times,
        m.prepared_transaction_offset,
        m.topic,
        m.flag,
        properties.join(", "),
        body_bytes.join(", "),
    )
}

fn message_json(broker_name: &str, m: &StoredMessage, charset: Charset, print_body: bool) -> JsonValue {
    let properties: BTreeMap<String, String> =
        m.properties_map().iter().map(|(k, v)| (k.to_owned(), v.to_owned())).collect();
    json!({
        "brokerName": broker_name,
        "topic": m.topic,
        "queueId": m.queue_id,
        "queueOffset": m.queue_offset,
        "msgId": m.property(keys::UNIQ_KEY),
        "offsetMsgId": m.offset_msg_id(),
        "tags": m.property(keys::TAGS),
        "keys": m.property(keys::KEYS),
        "commitLogOffset": m.physical_offset,
        "bornTimestamp": m.born_timestamp_ms,
        "storeTimestamp": m.store_timestamp_ms,
        "properties": properties,
        "body": print_body.then(|| charset.decode(&m.body)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charsets_decode_and_unknown_ones_are_refused() {
        assert_eq!(Charset::parse("utf-8").unwrap().decode("héllo".as_bytes()), "héllo");
        assert_eq!(Charset::parse("ISO-8859-1").unwrap().decode(&[0x68, 0xE9]), "hé");
        assert_eq!(Charset::parse("US-ASCII").unwrap().decode(&[0x68, 0xE9]), "h\u{FFFD}");
        let e = Charset::parse("GBK").unwrap_err().to_string();
        assert!(e.contains("charset GBK is not supported"), "{e}");
    }

    #[test]
    fn message_line_reads_like_java_message_ext() {
        let mut props = ferromq_protocol::message::MessageProperties::new();
        props.insert(keys::TAGS, "TagA");
        props.insert(keys::UNIQ_KEY, "UNIQ1");
        let mut m = StoredMessage {
            topic: "T".into(),
            queue_id: 2,
            queue_offset: 5,
            physical_offset: 100,
            body: bytes::Bytes::from_static(&[104, 0xFF]),
            born_host: "10.0.0.1:5000".parse().unwrap(),
            store_host: "10.0.0.2:10911".parse().unwrap(),
            body_crc: Some(7),
            ..StoredMessage::default()
        };
        m.set_properties(&props);
        let line = java_message_line("broker-a", &m, (0, 6), Charset::Utf8, false);
        assert!(line.starts_with("MSGID: UNIQ1 MessageExt [brokerName=broker-a, queueId=2, storeSize="), "{line}");
        assert!(line.contains("bornHost=/10.0.0.1:5000"), "{line}");
        assert!(line.contains(&format!("msgId={}, commitLogOffset=100, bodyCRC=7", m.offset_msg_id())), "{line}");
        assert!(line.contains("properties={TAGS=TagA, UNIQ_KEY=UNIQ1, MIN_OFFSET=0, MAX_OFFSET=6}"), "{line}");
        assert!(line.contains("body=[104, -1], transactionId='null'}] BODY: NOT PRINT BODY"), "{line}");
    }
}
