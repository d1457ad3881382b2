//! `statsAll`: every topic's put and get rates over the last minute and its message counts
//! over the last day, per consumer group, with the group's backlog. Java:
//! `tools/command/stats/StatsAllSubCommand`.

use ferromq_broker::metadata::is_retry_or_dlq_topic;
use ferromq_client::admin::{json, JsonValue};

use crate::admin::output::{print_json, Table};
use crate::admin::Ctx;

#[derive(Debug, clap::Args)]
pub(crate) struct StatsAllArgs {
    /// Only topics with messages in or out today.
    #[arg(short = 'a', long = "activeTopic")]
    active_topic: bool,
    /// Only this topic.
    #[arg(short = 't', long = "topic")]
    topic: Option<String>,
}

/// One output row: a topic, and one of its groups (none when nobody consumes it).
struct Row {
    topic: String,
    group: Option<String>,
    accumulation: i64,
    in_tps: f64,
    out_tps: f64,
    in_today: i64,
    out_today: i64,
}

pub(crate) async fn stats_all(ctx: &Ctx, a: StatsAllArgs) -> anyhow::Result<()> {
    let topics = ctx.client.topic_list().await?.topic_list;
    let mut rows = Vec::new();
    for topic in topics {
        if is_retry_or_dlq_topic(&topic) {
            continue;
        }
        if a.topic.as_deref().is_some_and(|t| !t.is_empty() && t != topic) {
            continue;
        }
        // As mqadmin, a topic whose figures cannot be read is left out.
        if let Ok(topic_rows) = topic_rows(ctx, &topic).await {
            rows.extend(topic_rows.into_iter().filter(|r| !a.active_topic || r.in_today > 0 || r.out_today > 0));
        }
    }
    if ctx.json {
        let rows: Vec<JsonValue> = rows
            .iter()
            .map(|r| {
                json!({ "topic": r.topic, "group": r.group, "accumulation": r.accumulation, "inTps": r.in_tps,
                    "outTps": r.out_tps, "inMsg24Hour": r.in_today, "outMsg24Hour": r.out_today })
            })
            .collect();
        return print_json(&json!(rows));
    }
    let mut out = Table::new(&[
        "#Topic",
        "#Consumer Group",
        "#Accumulation",
        "#InTPS",
        "#OutTPS",
        "#InMsg24Hour",
        "#OutMsg24Hour",
    ]);
    for r in rows {
        let consumed = r.group.is_some();
        out.row(vec![
            r.topic,
            r.group.unwrap_or_default(),
            r.accumulation.to_string(),
            format!("{:.2}", r.in_tps),
            if consumed { format!("{:.2}", r.out_tps) } else { String::new() },
            r.in_today.to_string(),
            if consumed { r.out_today.to_string() } else { "NO_CONSUMER".to_owned() },
        ]);
    }
    out.print();
    Ok(())
}

/// The rows of one topic, summed over its masters.
async fn topic_rows(ctx: &Ctx, topic: &str) -> anyhow::Result<Vec<Row>> {
    let route = ctx.client.topic_route(topic).await?;
    let masters: Vec<String> = route.broker_datas.iter().filter_map(|b| b.master_addr().map(str::to_owned)).collect();
    let (mut in_tps, mut in_today) = (0.0, 0);
    let mut groups = std::collections::BTreeSet::new();
    for addr in &masters {
        if let Ok(data) = ctx.client.broker_stats_data(addr, "TOPIC_PUT_NUMS", topic).await {
            in_tps += data.stats_minute.tps;
            in_today += day_sum(&data);
        }
        if let Ok(list) = ctx.client.topic_consume_by_who(addr, topic).await {
            groups.extend(list.group_list);
        }
    }
    if groups.is_empty() {
        let row =
            Row { topic: topic.to_owned(), group: None, accumulation: 0, in_tps, out_tps: 0.0, in_today, out_today: 0 };
        return Ok(vec![row]);
    }
    let mut rows = Vec::new();
    for group in groups {
        let (mut out_tps, mut out_today, mut accumulation) = (0.0, 0, 0);
        let key = format!("{topic}@{group}");
        for addr in &masters {
            if let Ok(data) = ctx.client.broker_stats_data(addr, "GROUP_GET_NUMS", &key).await {
                out_tps += data.stats_minute.tps;
                out_today += day_sum(&data);
            }
            if let Ok(stats) = ctx.client.consume_stats(addr, &group, Some(topic)).await {
                accumulation += stats.total_diff();
            }
        }
        rows.push(Row {
            topic: topic.to_owned(),
            group: Some(group),
            accumulation: accumulation.max(0),
            in_tps,
            out_tps,
            in_today,
            out_today,
        });
    }
    Ok(rows)
}

/// Messages counted today: the day's sum, else the hour's, else the minute's. Java:
/// `StatsAllSubCommand#compute24HourSum`.
pub(crate) fn day_sum(data: &ferromq_protocol::body::BrokerStatsData) -> i64 {
    [data.stats_day.sum, data.stats_hour.sum, data.stats_minute.sum].into_iter().find(|s| *s != 0).unwrap_or(0)
}
