//! `consumerStatus`: what each online consumer of a group reports about itself
//! (GET_CONSUMER_RUNNING_INFO through a broker), as mqadmin prints it: with `-i`, one client's
//! full report; without, a table of the clients with each report written to
//! `<now-ms>/<clientId>` under the working directory, then a check that the clients subscribe
//! alike and that no queue looks stuck. With `--json`, everything goes to stdout instead and no
//! file is written.
//! Java: `ConsumerStatusSubCommand`, `ConsumerRunningInfo#formatString` / `#analyze*`.
//!
//! Times print in UTC (Java uses the JVM's local time zone) and properties in key order (Java
//! prints its `Properties` in hash order).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Context;
use ferromq_client::admin::{json, AdminError, JsonValue};
use ferromq_protocol::body::{
    ConsumerConnection, ConsumerRunningInfo, MessageQueue, ProcessQueueInfo, PROP_CONSUMER_START_TIMESTAMP,
    PROP_CONSUME_ORDERLY,
};
use ferromq_protocol::civil_date::civil_from_days;

use crate::admin::group::{all_masters, version_desc};
use crate::admin::output::print_json;
use crate::admin::Ctx;

/// A push group whose first client started longer ago than this must subscribe alike.
/// Java: `ConsumerRunningInfo#analyzeSubscription`.
const SUBSCRIPTION_CHECK_AFTER_MS: i64 = 2 * 60 * 1000;
/// A concurrent queue holding messages and not consumed for this long looks blocked.
/// Java: `ConsumerRunningInfo#analyzeProcessQueue`.
const BLOCKED_AFTER_MS: i64 = 60 * 1000;

#[derive(Debug, clap::Args)]
pub(crate) struct ConsumerStatusArgs {
    /// Consumer group name.
    #[arg(short = 'g', long = "consumerGroup")]
    group: String,
    /// Print this client's full report only.
    #[arg(short = 'i', long = "clientId")]
    client_id: Option<String>,
    /// Ask this broker for the group's clients (default: a broker of the group's retry topic).
    #[arg(short = 'b', long = "brokerAddr")]
    broker_addr: Option<String>,
    /// Ask the consumers for a dump of their tasks (mqadmin: a jstack of the consumer JVM).
    #[arg(short = 's', long = "jstack")]
    jstack: bool,
}

pub(crate) async fn consumer_status(ctx: &Ctx, a: ConsumerStatusArgs) -> anyhow::Result<()> {
    let (broker, connection) = find_connections(ctx, &a.group, a.broker_addr.as_deref()).await?;
    if let Some(client_id) = a.client_id.as_deref().map(str::trim) {
        let info = ctx.client.consumer_running_info(&broker, &a.group, client_id, a.jstack).await?;
        if ctx.json {
            return print_json(&json!({ "group": a.group, "clientId": client_id, "runningInfo": info_json(&info) }));
        }
        print!("{}", format_running_info(&info));
        return Ok(());
    }
    let now = now_ms();
    let mut table: BTreeMap<String, ConsumerRunningInfo> = BTreeMap::new();
    let mut rows = Vec::new();
    let mut printed = 0;
    if !ctx.json {
        println!("{:<10} {:<40} {:<20} #ConsumerRunningInfoFile", "#Index", "#ClientId", "#Version");
    }
    for conn in &connection.connection_set {
        let info = match ctx.client.consumer_running_info(&broker, &a.group, &conn.client_id, a.jstack).await {
            Ok(info) => info,
            Err(e) => {
                // mqadmin prints the failure and goes on with the next client.
                eprintln!("Error: {:#}", anyhow::Error::new(e));
                continue;
            }
        };
        table.insert(conn.client_id.clone(), info.clone());
        let version = version_desc(conn.version);
        if ctx.json {
            rows.push(json!({ "clientId": conn.client_id, "version": version, "runningInfo": info_json(&info) }));
            continue;
        }
        let path = format!("{now}/{}", conn.client_id);
        if let Err(e) = write_report(&path, &format_running_info(&info)) {
            eprintln!("Error: {e:#}");
            continue;
        }
        printed += 1;
        println!("{printed:<10} {:<40} {version:<20} {path}", conn.client_id);
    }
    let same = (!table.is_empty()).then(|| same_subscriptions(&table, now));
    let problems: Vec<String> =
        table.iter().map(|(client_id, info)| process_queue_problems(client_id, info, now)).collect();
    if ctx.json {
        return print_json(&json!({
            "group": a.group,
            "consumers": rows,
            "subscriptionSame": same,
            "rebalanceOk": same,
            "problems": problems.concat().lines().collect::<Vec<_>>(),
        }));
    }
    match same {
        Some(true) => {
            print!("\n\nSame subscription in the same group of consumer");
            println!("\n\nRebalance OK");
            print!("{}", problems.concat());
        }
        Some(false) => println!("\n\nWARN: Different subscription in the same group of consumer!!!"),
        None => {}
    }
    Ok(())
}

/// The broker asked and the group's online clients it lists: `-b`, else the brokers of the
/// group's retry topic (as mqadmin), else every master; the first that lists a client.
async fn find_connections(
    ctx: &Ctx,
    group: &str,
    broker_addr: Option<&str>,
) -> anyhow::Result<(String, ConsumerConnection)> {
    let brokers = match broker_addr {
        Some(addr) => vec![addr.to_owned()],
        None => match ctx.client.route_brokers(&format!("%RETRY%{group}")).await {
            Ok(brokers) if !brokers.is_empty() => brokers.into_iter().map(|(_, addr)| addr).collect(),
            _ => all_masters(ctx).await?.into_iter().map(|(_, addr)| addr).collect(),
        },
    };
    let mut last_error: Option<AdminError> = None;
    for addr in brokers {
        match ctx.client.consumer_connection(&addr, group).await {
            Ok(c) if !c.connection_set.is_empty() => return Ok((addr, c)),
            Ok(_) => {}
            Err(e) => last_error = Some(e),
        }
    }
    match last_error {
        Some(e) => Err(anyhow::Error::new(e).context(format!("the consumer group {group} is not online"))),
        None => anyhow::bail!("the consumer group {group} is not online"),
    }
}

fn write_report(path: &str, text: &str) -> anyhow::Result<()> {
    if let Some(parent) = std::path::Path::new(path).parent() {
        std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
    }
    std::fs::write(path, text).with_context(|| format!("cannot write {path}"))
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Milliseconds since the epoch as `yyyyMMddHHmmssSSS`, UTC. Java: `UtilAll.timeMillisToHumanString`.
fn human_ms(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let rem = secs.rem_euclid(86_400);
    format!("{y:04}{m:02}{d:02}{:02}{:02}{:02}{:03}", rem / 3600, rem % 3600 / 60, rem % 60, ms.rem_euclid(1000))
}

/// Java's `MessageQueue#toString`.
fn queue_text(mq: &MessageQueue) -> String {
    format!("MessageQueue [topic={}, brokerName={}, queueId={}]", mq.topic, mq.broker_name, mq.queue_id)
}

/// Java's `ProcessQueueInfo#toString`.
fn process_queue_text(q: &ProcessQueueInfo) -> String {
    format!(
        "ProcessQueueInfo [commitOffset={}, cachedMsgMinOffset={}, cachedMsgMaxOffset={}, cachedMsgCount={}, \
         cachedMsgSizeInMiB={}, transactionMsgMinOffset={}, transactionMsgMaxOffset={}, transactionMsgCount={}, \
         locked={}, tryUnlockTimes={}, lastLockTimestamp={}, droped={}, lastPullTimestamp={}, \
         lastConsumeTimestamp={}]",
        q.commit_offset,
        q.cached_msg_min_offset,
        q.cached_msg_max_offset,
        q.cached_msg_count,
        q.cached_msg_size_in_mib,
        q.transaction_msg_min_offset,
        q.transaction_msg_max_offset,
        q.transaction_msg_count,
        q.locked,
        q.try_unlock_times,
        human_ms(q.last_lock_timestamp),
        q.dropped,
        human_ms(q.last_pull_timestamp),
        human_ms(q.last_consume_timestamp),
    )
}

/// One client's report, section by section. Java: `ConsumerRunningInfo#formatString`.
fn format_running_info(info: &ConsumerRunningInfo) -> String {
    let mut sb = String::new();
    sb.push_str("#Consumer Properties#\n");
    for (key, value) in &info.properties {
        let _ = writeln!(sb, "{key:<40}: {value}");
    }
    sb.push_str("\n\n#Consumer Subscription#\n");
    for (i, sub) in info.subscription_set.iter().enumerate() {
        let _ = writeln!(
            sb,
            "{:03} Topic: {:<40} ClassFilter: {:<8} SubExpression: {}",
            i + 1,
            sub.topic,
            sub.class_filter_mode,
            sub.sub_string
        );
    }
    sb.push_str("\n\n#Consumer Offset#\n");
    let _ = writeln!(sb, "{:<64}  {:<32}  {:<4}  {:<20}", "#Topic", "#Broker Name", "#QID", "#Consumer Offset");
    for (mq, q) in &info.mq_table {
        let _ = writeln!(sb, "{:<32}  {:<32}  {:<4}  {:<20}", mq.topic, mq.broker_name, mq.queue_id, q.commit_offset);
    }
    sb.push_str("\n\n#Consumer MQ Detail#\n");
    let _ = writeln!(sb, "{:<64}  {:<32}  {:<4}  {:<20}", "#Topic", "#Broker Name", "#QID", "#ProcessQueueInfo");
    for (mq, q) in &info.mq_table {
        let _ = writeln!(sb, "{:<64}  {:<32}  {:<4}  {}", mq.topic, mq.broker_name, mq.queue_id, process_queue_text(q));
    }
    sb.push_str("\n\n#Consumer Pop Detail#\n");
    let _ = writeln!(sb, "{:<32}  {:<32}  {:<4}  {:<20}", "#Topic", "#Broker Name", "#QID", "#ProcessQueueInfo");
    for (mq, q) in &info.mq_pop_table {
        let _ = writeln!(
            sb,
            "{:<32}  {:<32}  {:<4}  PopProcessQueueInfo [waitAckCount:{}, droped:{}, lastPopTimestamp:{}]",
            mq.topic, mq.broker_name, mq.queue_id, q.wait_ack_count, q.dropped, q.last_pop_timestamp
        );
    }
    sb.push_str("\n\n#Consumer RT&TPS#\n");
    let _ = writeln!(
        sb,
        "{:<64}  {:>14} {:>14} {:>14} {:>14} {:>18} {:>25}",
        "#Topic",
        "#Pull RT",
        "#Pull TPS",
        "#Consume RT",
        "#ConsumeOK TPS",
        "#ConsumeFailed TPS",
        "#ConsumeFailedMsgsInHour"
    );
    for (topic, s) in &info.status_table {
        let _ = writeln!(
            sb,
            "{topic:<32}  {:>14.2} {:>14.2} {:>14.2} {:>14.2} {:>18.2} {:>25}",
            s.pull_rt, s.pull_tps, s.consume_rt, s.consume_ok_tps, s.consume_failed_tps, s.consume_failed_msgs
        );
    }
    sb.push_str("\n\n#User Consume Info#\n");
    for (key, value) in &info.user_consumer_info {
        let _ = writeln!(sb, "{key:<40}: {value}");
    }
    if let Some(jstack) = &info.jstack {
        sb.push_str("\n\n#Consumer jstack#\n");
        sb.push_str(jstack);
    }
    sb
}

/// Whether every client subscribes alike (by `topic@subString`, as Java's `TreeSet` compares).
/// Only checked for push groups whose first client (by id) started over two minutes ago; true
/// otherwise. Java: `ConsumerRunningInfo#analyzeSubscription`.
fn same_subscriptions(table: &BTreeMap<String, ConsumerRunningInfo>, now: i64) -> bool {
    let Some(first) = table.values().next() else { return true };
    let started = first.properties.get(PROP_CONSUMER_START_TIMESTAMP).and_then(|t| t.parse::<i64>().ok());
    let settled = started.is_some_and(|t| now - t > SUBSCRIPTION_CHECK_AFTER_MS);
    if !first.is_push_type() || !settled {
        return true;
    }
    let keys = |info: &ConsumerRunningInfo| -> Vec<String> {
        let mut keys: Vec<String> =
            info.subscription_set.iter().map(|s| format!("{}@{}", s.topic, s.sub_string)).collect();
        keys.sort();
        keys.dedup();
        keys
    };
    let expected = keys(first);
    table.values().all(|info| keys(info) == expected)
}

/// One line per queue of a push client that looks stuck: an orderly queue without its lock, a
/// dropped orderly queue that failed to unlock, a concurrent queue holding messages and not
/// consumed for a minute. Java: `ConsumerRunningInfo#analyzeProcessQueue`.
fn process_queue_problems(client_id: &str, info: &ConsumerRunningInfo, now: i64) -> String {
    let mut sb = String::new();
    if !info.is_push_type() {
        return sb;
    }
    let orderly = info.properties.get(PROP_CONSUME_ORDERLY).is_some_and(|v| v == "true");
    for (mq, q) in &info.mq_table {
        let mq = queue_text(mq);
        if orderly {
            if !q.locked {
                let _ = writeln!(sb, "{client_id} {mq} can't lock for a while, {}ms", now - q.last_lock_timestamp);
            } else if q.dropped && q.try_unlock_times > 0 {
                let _ = writeln!(sb, "{client_id} {mq} unlock {} times, still failed", q.try_unlock_times);
            }
        } else {
            let idle = now - q.last_consume_timestamp;
            if idle > BLOCKED_AFTER_MS && q.cached_msg_count > 0 {
                let _ = writeln!(sb, "{client_id} {mq} can't consume for a while, maybe blocked, {idle}ms");
            }
        }
    }
    sb
}

/// The report as standard JSON: queue tables as lists of objects carrying their queue.
fn info_json(info: &ConsumerRunningInfo) -> JsonValue {
    let queues: Vec<JsonValue> = info
        .mq_table
        .iter()
        .map(|(mq, q)| {
            let mut entry = json!(q);
            if let Some(fields) = entry.as_object_mut() {
                fields.insert("topic".into(), json!(mq.topic));
                fields.insert("brokerName".into(), json!(mq.broker_name));
                fields.insert("queueId".into(), json!(mq.queue_id));
            }
            entry
        })
        .collect();
    let pop_queues: Vec<JsonValue> = info
        .mq_pop_table
        .iter()
        .map(|(mq, q)| {
            json!({ "topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id,
                "waitAckCount": q.wait_ack_count, "droped": q.dropped, "lastPopTimestamp": q.last_pop_timestamp })
        })
        .collect();
    json!({
        "properties": info.properties,
        "subscriptionSet": info.subscription_set,
        "mqTable": queues,
        "mqPopTable": pop_queues,
        "statusTable": info.status_table,
        "userConsumerInfo": info.user_consumer_info,
        "jstack": info.jstack,
    })
}

#[cfg(test)]
mod tests {
    use ferromq_protocol::body::{ConsumeStatus, SubscriptionData, PROP_CONSUME_TYPE};

    use super::*;

    fn info(start_ms: i64, subs: &[(&str, &str)]) -> ConsumerRunningInfo {
        let queue = ProcessQueueInfo {
            commit_offset: 5,
            cached_msg_count: 1,
            last_consume_timestamp: 1_700_000_000_123,
            ..ProcessQueueInfo::default()
        };
        ConsumerRunningInfo {
            properties: BTreeMap::from([
                (PROP_CONSUME_TYPE.to_owned(), "CONSUME_PASSIVELY".to_owned()),
                (PROP_CONSUMER_START_TIMESTAMP.to_owned(), start_ms.to_string()),
            ]),
            subscription_set: subs
                .iter()
                .map(|(t, e)| SubscriptionData { topic: (*t).into(), sub_string: (*e).into(), ..Default::default() })
                .collect(),
            mq_table: BTreeMap::from([(MessageQueue::new("T", "b", 0), queue)]),
            status_table: BTreeMap::from([("T".to_owned(), ConsumeStatus { pull_tps: 1.5, ..Default::default() })]),
            ..ConsumerRunningInfo::default()
        }
    }

    #[test]
    fn report_follows_mqadmin_layout() {
        let text = format_running_info(&info(0, &[("T", "*")]));
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "#Consumer Properties#");
        assert_eq!(lines[1], format!("{:<40}: 0", PROP_CONSUMER_START_TIMESTAMP));
        assert!(text.contains("\n\n\n#Consumer Subscription#\n001 Topic: T"), "{text}");
        assert!(text.contains(&format!("{:<32}  {:<32}  {:<4}  {:<20}\n", "T", "b", 0, 5)), "{text}");
        assert!(text.contains("lastConsumeTimestamp=20231114221320123]"), "{text}");
        assert!(text.contains(&format!("{:<32}  {:>14.2} {:>14.2}", "T", 0.0, 1.5)), "{text}");
        assert!(text.ends_with("#User Consume Info#\n"), "{text}");
        let with_dump = ConsumerRunningInfo { jstack: Some("tasks\n".into()), ..info(0, &[]) };
        assert!(format_running_info(&with_dump).ends_with("\n\n#Consumer jstack#\ntasks\n"));
    }

    #[test]
    fn subscriptions_are_compared_once_the_group_settled() {
        let now = 10 * 60 * 1000;
        let a = info(0, &[("T", "*"), ("%RETRY%g", "*")]);
        let b = info(0, &[("%RETRY%g", "*"), ("T", "*")]);
        let c = info(0, &[("T", "TagA")]);
        let table = BTreeMap::from([("a".to_owned(), a.clone()), ("b".to_owned(), b)]);
        assert!(same_subscriptions(&table, now));
        let table = BTreeMap::from([("a".to_owned(), a.clone()), ("c".to_owned(), c.clone())]);
        assert!(!same_subscriptions(&table, now));
        assert!(same_subscriptions(&table, 60_000), "a young group is not judged");
        let mut pull = a;
        pull.properties.insert(PROP_CONSUME_TYPE.into(), "CONSUME_ACTIVELY".into());
        let table = BTreeMap::from([("a".to_owned(), pull), ("c".to_owned(), c)]);
        assert!(same_subscriptions(&table, now), "pull groups are not judged");
    }

    #[test]
    fn blocked_queues_are_named() {
        let i = info(0, &[("T", "*")]);
        let now = 1_700_000_000_123 + 61_000;
        assert_eq!(
            process_queue_problems("c1", &i, now),
            "c1 MessageQueue [topic=T, brokerName=b, queueId=0] can't consume for a while, maybe blocked, 61000ms\n"
        );
        assert_eq!(process_queue_problems("c1", &i, now - 2_000), "");
        let mut orderly = i;
        orderly.properties.insert(PROP_CONSUME_ORDERLY.into(), "true".into());
        assert!(process_queue_problems("c1", &orderly, now).contains("can't lock for a while"));
    }
}
