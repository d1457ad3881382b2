//! Message commands: queryMsgByKey, queryMsgById, queryMsgByOffset, sendMessage,
//! consumeMessage, decodeMessageId. Java: `tools/command/message/*`.

use anyhow::Context;
use ferromq_client::admin::{json, JsonValue, PullStatus, TOOLS_CONSUMER_GROUP};
use ferromq_client::{ProducerConfig, CREATE_TOPIC_KEY};
use ferromq_protocol::body::perm;
use ferromq_protocol::message::{create_offset_msg_id, decode_offset_msg_id, keys, StoredMessage};
use ferromq_protocol::response_code;

use crate::admin::output::{format_ms, print_json, Table};
use crate::admin::Ctx;

/// Messages one pull asks for.
const PULL_BATCH_MAX: i32 = 32;

#[derive(Debug, clap::Args)]
pub(crate) struct QueryMsgByKeyArgs {
    /// Topic name.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// Message key.
    #[arg(short = 'k', long = "msgKey")]
    key: String,
    /// Earliest store time, ms since the epoch.
    #[arg(short = 'b', long = "beginTimestamp", default_value_t = 0)]
    begin: i64,
    /// Latest store time, ms since the epoch.
    #[arg(short = 'e', long = "endTimestamp", default_value_t = i64::MAX)]
    end: i64,
    /// Most messages to return per broker.
    #[arg(short = 'm', long = "maxNum", default_value_t = 64)]
    max_num: i32,
    /// Cluster (accepted; the topic's route decides the brokers).
    #[arg(short = 'c', long = "cluster")]
    cluster: Option<String>,
}

pub(crate) async fn query_msg_by_key(ctx: &Ctx, a: QueryMsgByKeyArgs) -> anyhow::Result<()> {
    let mut found = Vec::new();
    for (broker, addr) in ctx.client.route_brokers(&a.topic).await? {
        let messages = ctx.client.query_message(&addr, &a.topic, &a.key, a.max_num, (a.begin, a.end), false).await?;
        found.extend(messages.into_iter().map(|m| (broker.clone(), m)));
    }
    if ctx.json {
        let items: Vec<JsonValue> = found.iter().map(|(b, m)| message_json(b, m)).collect();
        return print_json(&json!(items));
    }
    let mut table = Table::new(&["#Message ID", "#Offset Msg ID", "#QID", "#Offset"]);
    for (_, m) in &found {
        table.row(vec![
            m.property(keys::UNIQ_KEY).unwrap_or("-").to_owned(),
            m.offset_msg_id(),
            m.queue_id.to_string(),
            m.queue_offset.to_string(),
        ]);
    }
    table.print();
    Ok(())
}

#[derive(Debug, clap::Args)]
pub(crate) struct QueryMsgByIdArgs {
    /// Message id: an offset message id, or a unique id together with -t.
    #[arg(short = 'i', long = "msgId")]
    msg_id: String,
    /// Topic, to look a unique (client) message id up.
    #[arg(short = 't', long = "topic")]
    topic: Option<String>,
    /// With -d: the consumer group of the client that consumes the message again.
    #[arg(short = 'g', long = "consumerGroup")]
    group: Option<String>,
    /// With -g: the client that consumes the message again (CONSUME_MESSAGE_DIRECTLY).
    #[arg(short = 'd', long = "clientId")]
    client_id: Option<String>,
}

pub(crate) async fn query_msg_by_id(ctx: &Ctx, a: QueryMsgByIdArgs) -> anyhow::Result<()> {
    let mut found = Vec::new();
    for id in a.msg_id.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        match ctx.client.view_message_by_offset_id(id).await {
            Ok((addr, m)) => found.push((addr, m)),
            Err(ferromq_client::admin::AdminError::MessageId { .. }) if a.topic.is_some() => {
                let topic = a.topic.as_deref().unwrap_or_default();
                for (_, addr) in ctx.client.route_brokers(topic).await? {
                    let messages = ctx.client.query_message(&addr, topic, id, 32, (0, i64::MAX), true).await?;
                    found.extend(messages.into_iter().map(|m| (addr.clone(), m)));
                }
            }
            Err(e) => return Err(e.into()),
        }
    }
    if found.is_empty() {
        anyhow::bail!("no message found for id {}", a.msg_id);
    }
    if let (Some(group), Some(client_id)) = (a.group.as_deref(), a.client_id.as_deref()) {
        // Java's queryMsgById -g -d: the client consumes each message again and says how.
        for (addr, m) in &found {
            let offset_id = create_offset_msg_id(m.store_host, m.physical_offset);
            let result = ctx.client.consume_message_directly(addr, group, client_id, &m.topic, &offset_id).await?;
            println!("{result}");
        }
        return Ok(());
    }
    print_messages(ctx, &found)
}

/// `queryMsgByUniqueKey`: a message by its unique (client) id within a topic; with -g and
/// -d, consumed again by that client. Java: `QueryMsgByUniqueKeySubCommand`.
pub(crate) async fn query_msg_by_unique_key(ctx: &Ctx, a: QueryMsgByUniqueKeyArgs) -> anyhow::Result<()> {
    let by_id = QueryMsgByIdArgs { msg_id: a.msg_id, topic: Some(a.topic), group: a.group, client_id: a.client_id };
    query_msg_by_id(ctx, by_id).await
}

#[derive(Debug, clap::Args)]
pub(crate) struct QueryMsgByUniqueKeyArgs {
    /// The message's unique id (UNIQ_KEY).
    #[arg(short = 'i', long = "msgId")]
    msg_id: String,
    /// Topic.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// With -d: the consumer group of the client that consumes the message again.
    #[arg(short = 'g', long = "consumerGroup")]
    group: Option<String>,
    /// With -g: the client that consumes the message again.
    #[arg(short = 'd', long = "clientId")]
    client_id: Option<String>,
    /// Accepted for mqadmin compatibility: every message found is shown.
    #[arg(short = 'a', long = "showAll")]
    show_all: bool,
}

#[derive(Debug, clap::Args)]
pub(crate) struct QueryMsgByOffsetArgs {
    /// Topic name.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// Broker name.
    #[arg(short = 'b', long = "brokerName")]
    broker_name: String,
    /// Queue id.
    #[arg(short = 'i', long = "queueId")]
    queue_id: i32,
    /// Queue offset.
    #[arg(short = 'o', long = "offset")]
    offset: i64,
}

pub(crate) async fn query_msg_by_offset(ctx: &Ctx, a: QueryMsgByOffsetArgs) -> anyhow::Result<()> {
    let addr = broker_addr(ctx, &a.topic, &a.broker_name).await?;
    let result = ctx.client.pull_message(&addr, TOOLS_CONSUMER_GROUP, &a.topic, a.queue_id, a.offset, 1).await?;
    let Some(m) = result.messages.into_iter().next() else {
        anyhow::bail!(
            "no message at offset {} of {}:{}:{} on {addr} ({:?}; queue offsets {}..{})",
            a.offset,
            a.topic,
            a.broker_name,
            a.queue_id,
            result.status,
            result.min_offset,
            result.max_offset
        );
    };
    print_messages(ctx, &[(addr, m)])
}

/// The address of broker group `broker_name` in the route of `topic`.
async fn broker_addr(ctx: &Ctx, topic: &str, broker_name: &str) -> anyhow::Result<String> {
    ctx.client
        .route_brokers(topic)
        .await?
        .into_iter()
        .find(|(name, _)| name == broker_name)
        .map(|(_, addr)| addr)
        .with_context(|| format!("broker {broker_name} is not in the route of topic {topic}"))
}

fn message_json(broker: &str, m: &StoredMessage) -> JsonValue {
    json!({
        "broker": broker,
        "topic": m.topic,
        "msgId": m.property(keys::UNIQ_KEY),
        "offsetMsgId": m.offset_msg_id(),
        "tags": m.property(keys::TAGS),
        "keys": m.property(keys::KEYS),
        "queueId": m.queue_id,
        "queueOffset": m.queue_offset,
        "commitLogOffset": m.physical_offset,
        "reconsumeTimes": m.reconsume_times,
        "bornTimestamp": m.born_timestamp_ms,
        "storeTimestamp": m.store_timestamp_ms,
        "bornHost": m.born_host.to_string(),
        "storeHost": m.store_host.to_string(),
        "sysFlag": m.sys_flag,
        "properties": m.properties_map().iter().map(|(k, v)| (k.to_owned(), v.to_owned())).collect::<std::collections::BTreeMap<_, _>>(),
        "body": String::from_utf8_lossy(&m.body),
    })
}

fn print_messages(ctx: &Ctx, found: &[(String, StoredMessage)]) -> anyhow::Result<()> {
    if ctx.json {
        let items: Vec<JsonValue> = found.iter().map(|(b, m)| message_json(b, m)).collect();
        return print_json(&json!(items));
    }
    for (i, (addr, m)) in found.iter().enumerate() {
        if i > 0 {
            println!();
        }
        let field = |name: &str, value: String| println!("{:<20} {value}", format!("{name}:"));
        field("OffsetID", m.offset_msg_id());
        field("Broker", addr.clone());
        field("Topic", m.topic.clone());
        field("Tags", format!("[{}]", m.property(keys::TAGS).unwrap_or("")));
        field("Keys", format!("[{}]", m.property(keys::KEYS).unwrap_or("")));
        field("Queue ID", m.queue_id.to_string());
        field("Queue Offset", m.queue_offset.to_string());
        field("CommitLog Offset", m.physical_offset.to_string());
        field("Reconsume Times", m.reconsume_times.to_string());
        field("Born Timestamp", format_ms(m.born_timestamp_ms));
        field("Store Timestamp", format_ms(m.store_timestamp_ms));
        field("Born Host", m.born_host.to_string());
        field("Store Host", m.store_host.to_string());
        field("System Flag", m.sys_flag.to_string());
        field("Properties", m.properties.replace(['\u{1}', '\u{2}'], " "));
        field("Message Body", String::from_utf8_lossy(&m.body).into_owned());
    }
    Ok(())
}

#[derive(Debug, clap::Args)]
pub(crate) struct SendMessageArgs {
    /// Topic name.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// Message body (UTF-8).
    #[arg(short = 'p', long = "body")]
    body: String,
    /// Message key(s), space-separated.
    #[arg(short = 'k', long = "key")]
    key: Option<String>,
    /// Message tag.
    #[arg(short = 'c', long = "tags")]
    tags: Option<String>,
    /// Send to this broker group.
    #[arg(short = 'b', long = "broker")]
    broker: Option<String>,
    /// Send to this queue (needs -b to be meaningful across brokers).
    #[arg(short = 'i', long = "qid")]
    queue_id: Option<i32>,
    /// Message trace (accepted; not supported).
    #[arg(short = 'm', long = "msgTraceEnable")]
    msg_trace_enable: Option<bool>,
}

pub(crate) async fn send_message(ctx: &Ctx, a: SendMessageArgs) -> anyhow::Result<()> {
    let route = match ctx.client.topic_route(&a.topic).await {
        Ok(route) => route,
        // As Java's producer (`tryToFindTopicPublishInfo`): a topic without a route is sent
        // through the template topic's brokers, which create it on the first message.
        Err(ferromq_client::admin::AdminError::Response { code: response_code::TOPIC_NOT_EXIST, .. }) => {
            let mut route = ctx.client.topic_route(CREATE_TOPIC_KEY).await.with_context(|| {
                format!("topic {} has no route and the broker does not auto-create topics (no {CREATE_TOPIC_KEY} route; set autoCreateTopicEnable=true or create it with updateTopic)", a.topic)
            })?;
            let queue_nums = ProducerConfig::default().default_topic_queue_nums;
            for q in &mut route.queue_datas {
                q.write_queue_nums = q.write_queue_nums.min(queue_nums);
                q.read_queue_nums = q.write_queue_nums;
            }
            route
        }
        Err(e) => return Err(e.into()),
    };
    let queue = route
        .queue_datas
        .iter()
        .filter(|q| perm::is_writeable(q.perm) && q.write_queue_nums > 0)
        .find(|q| a.broker.as_deref().is_none_or(|b| b == q.broker_name))
        .with_context(|| {
            format!("no writable queue of topic {} on broker {}", a.topic, a.broker.as_deref().unwrap_or("*"))
        })?;
    let addr = route
        .broker_datas
        .iter()
        .find(|b| b.broker_name == queue.broker_name)
        .and_then(|b| b.master_addr())
        .with_context(|| format!("broker {} of topic {} has no master", queue.broker_name, a.topic))?;
    let queue_id = a.queue_id.unwrap_or(0);
    if queue_id < 0 || queue_id >= queue.write_queue_nums {
        anyhow::bail!("queue id {queue_id} is outside 0..{} on {}", queue.write_queue_nums, queue.broker_name);
    }
    let result = ctx
        .client
        .send_message(
            addr,
            &queue.broker_name,
            &a.topic,
            queue_id,
            a.body.as_bytes(),
            a.tags.as_deref(),
            a.key.as_deref(),
        )
        .await?;
    if ctx.json {
        return print_json(&json!({ "brokerName": result.broker_name, "brokerAddr": addr, "queueId": result.queue_id,
            "queueOffset": result.queue_offset, "sendStatus": "SEND_OK", "msgId": result.msg_id,
            "offsetMsgId": result.offset_msg_id }));
    }
    let mut table = Table::new(&["#Broker Name", "#QID", "#Send Result", "#MsgId", "#OffsetMsgId"]);
    table.row(vec![
        result.broker_name,
        result.queue_id.to_string(),
        "SEND_OK".to_owned(),
        result.msg_id,
        result.offset_msg_id,
    ]);
    table.print();
    Ok(())
}

#[derive(Debug, clap::Args)]
pub(crate) struct ConsumeMessageArgs {
    /// Topic name.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// Only this broker group.
    #[arg(short = 'b', long = "brokerName")]
    broker_name: Option<String>,
    /// Only this queue.
    #[arg(short = 'i', long = "queueId")]
    queue_id: Option<i32>,
    /// Start offset in each queue (default: the queue's minimum).
    #[arg(short = 'o', long = "offset")]
    offset: Option<i64>,
    /// Consumer group; its offsets are committed after consuming.
    #[arg(short = 'g', long = "consumerGroup")]
    group: Option<String>,
    /// Most messages to consume.
    #[arg(short = 'c', long = "MessageNumber", default_value_t = 128)]
    count: usize,
}

pub(crate) async fn consume_message(ctx: &Ctx, a: ConsumeMessageArgs) -> anyhow::Result<()> {
    let route = ctx.client.topic_route(&a.topic).await?;
    let group = a.group.as_deref().unwrap_or(TOOLS_CONSUMER_GROUP);
    let mut consumed: Vec<(String, StoredMessage)> = Vec::new();
    for q in route.queue_datas.iter().filter(|q| a.broker_name.as_deref().is_none_or(|b| b == q.broker_name)) {
        let Some(addr) =
            route.broker_datas.iter().find(|b| b.broker_name == q.broker_name).and_then(|b| b.select_broker_addr())
        else {
            continue;
        };
        for queue_id in (0..q.read_queue_nums).filter(|id| a.queue_id.is_none_or(|want| want == *id)) {
            let mut offset = a.offset.unwrap_or(0);
            let mut retried = false;
            while consumed.len() < a.count {
                let want = PULL_BATCH_MAX.min(i32::try_from(a.count - consumed.len()).unwrap_or(PULL_BATCH_MAX));
                let result = ctx.client.pull_message(addr, group, &a.topic, queue_id, offset, want).await?;
                match result.status {
                    PullStatus::Found => {
                        offset = result.next_begin_offset;
                        consumed.extend(result.messages.into_iter().map(|m| (q.broker_name.clone(), m)));
                    }
                    // An offset below the minimum moves to it once; anything else ends this queue.
                    PullStatus::OffsetIllegal if !retried && result.next_begin_offset != offset => {
                        retried = true;
                        offset = result.next_begin_offset;
                    }
                    _ => break,
                }
            }
            if a.group.is_some() && offset > 0 {
                ctx.client.update_consumer_offset(addr, group, &a.topic, queue_id, offset).await?;
            }
        }
    }
    if ctx.json {
        let items: Vec<JsonValue> = consumed.iter().map(|(b, m)| message_json(b, m)).collect();
        return print_json(&json!({ "consumed": consumed.len(), "messages": items }));
    }
    let mut table = Table::new(&["#Broker Name", "#QID", "#Offset", "#MsgId", "#Body"]);
    for (broker, m) in &consumed {
        table.row(vec![
            broker.clone(),
            m.queue_id.to_string(),
            m.queue_offset.to_string(),
            m.property(keys::UNIQ_KEY).unwrap_or("-").to_owned(),
            String::from_utf8_lossy(&m.body).into_owned(),
        ]);
    }
    table.print();
    println!("Consumed {} message(s).", consumed.len());
    Ok(())
}

#[derive(Debug, clap::Args)]
pub(crate) struct DecodeMessageIdArgs {
    /// Offset message ids, comma-separated.
    #[arg(short = 'i', long = "messageId")]
    msg_ids: String,
}

/// `decodeMessageId`: the store host and CommitLog offset inside offset message ids (fact
/// sheet 3.4), without asking any server. Every id is checked before anything is printed.
pub(crate) fn decode_message_id(ctx: &Ctx, a: DecodeMessageIdArgs) -> anyhow::Result<()> {
    let ids: Vec<&str> = a.msg_ids.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
    if ids.is_empty() {
        anyhow::bail!("give one or more offset message ids with -i (comma-separated)");
    }
    let mut decoded = Vec::with_capacity(ids.len());
    for id in ids {
        let (host, offset) = decode_offset_msg_id(id).with_context(|| format!("{id} is not an offset message id"))?;
        decoded.push((id, host, offset));
    }
    if ctx.json {
        let items: Vec<JsonValue> = decoded
            .iter()
            .map(|(id, host, offset)| {
                json!({ "msgId": id, "storeHost": host.to_string(), "ip": host.ip().to_string(),
                    "port": host.port(), "commitLogOffset": offset })
            })
            .collect();
        return print_json(&json!(items));
    }
    let mut table = Table::new(&["#Offset Msg ID", "#Store Host", "#CommitLog Offset"]);
    for (id, host, offset) in decoded {
        table.row(vec![id.to_owned(), host.to_string(), offset.to_string()]);
    }
    table.print();
    Ok(())
}
