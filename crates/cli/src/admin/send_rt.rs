//! Send round-trip checks: sendMsgStatus (one broker, each send's RT) and clusterRT (every
//! broker of one or all clusters, average RT per broker, repeated). Both send to the topic
//! every broker creates under its own name (`brokerTopicEnable`), so they measure exactly that
//! broker. Java: `tools/command/broker/SendMsgStatusCommand`,
//! `tools/command/cluster/CLusterSendMsgRTCommand`.

use std::time::{Duration, Instant};

use anyhow::Context;
use ferromq_client::admin::{json, JsonValue, SendResult};
use ferromq_protocol::civil_date::civil_from_days;

use crate::admin::output::print_json;
use crate::admin::Ctx;

/// The body sendMsgStatus repeats up to the message size (Java's text).
const STATUS_BODY_UNIT: &str = "hello jodie";
/// Size of sendMsgStatus's first, unreported message (it warms the connection up).
const WARM_UP_SIZE: usize = 16;
/// clusterRT's `-p true` lines carry the time in GMT+8, as Java's tool hard-codes.
const TLOG_UTC_OFFSET_SECS: i64 = 8 * 3600;

#[derive(Debug, clap::Args)]
pub(crate) struct SendMsgStatusArgs {
    /// Broker name (its own topic is sent to).
    #[arg(short = 'b', long = "brokerName")]
    broker_name: String,
    /// Message size in bytes.
    #[arg(short = 's', long = "messageSize", default_value_t = 128)]
    message_size: usize,
    /// How many messages to send.
    #[arg(short = 'c', long = "count", default_value_t = 50)]
    count: u32,
}

#[derive(Debug, clap::Args)]
pub(crate) struct ClusterRtArgs {
    /// Messages per broker and round.
    #[arg(short = 'a', long = "amount", default_value_t = 100)]
    amount: u32,
    /// Message size in bytes.
    #[arg(short = 's', long = "size", default_value_t = 128)]
    size: usize,
    /// Only this cluster (default: every cluster).
    #[arg(short = 'c', long = "cluster")]
    cluster: Option<String>,
    /// Print `time|room|cluster|broker|rt` lines instead of the table (true or false).
    #[arg(short = 'p', long = "printLog", default_value = "false", action = clap::ArgAction::Set, value_parser = clap::builder::BoolishValueParser::new())]
    print_as_tlog: bool,
    /// Machine room name for the -p lines.
    #[arg(short = 'm', long = "machineRoom", default_value = "noname")]
    machine_room: String,
    /// Seconds between rounds.
    #[arg(short = 'i', long = "interval", default_value_t = 10)]
    interval_secs: u64,
    /// Stop after this many rounds (FerroMQ addition; 0, the default, runs until stopped as
    /// mqadmin does).
    #[arg(long = "rounds", default_value_t = 0)]
    rounds: u64,
}

/// Sends to one broker's own topic, round robin over the topic's writable queues.
struct BrokerTopicSender {
    topic: String,
    /// (broker name, address, queue id) of each writable queue.
    queues: Vec<(String, String, i32)>,
    next: usize,
}

impl BrokerTopicSender {
    async fn new(ctx: &Ctx, broker_name: &str) -> anyhow::Result<Self> {
        let route = ctx.client.topic_route(broker_name).await.with_context(|| {
            format!("no route for topic {broker_name}: is {broker_name} a broker name, with brokerTopicEnable=true?")
        })?;
        let queues: Vec<(String, String, i32)> =
            route.publish_queues(broker_name).into_iter().map(|(q, addr)| (q.broker_name, addr, q.queue_id)).collect();
        if queues.is_empty() {
            anyhow::bail!("topic {broker_name} has no writable queue on a master");
        }
        Ok(BrokerTopicSender { topic: broker_name.to_owned(), queues, next: 0 })
    }

    async fn send(&mut self, ctx: &Ctx, body: &[u8]) -> anyhow::Result<SendResult> {
        let (broker, addr, queue_id) = &self.queues[self.next % self.queues.len()];
        self.next = self.next.wrapping_add(1);
        Ok(ctx.client.send_message(addr, broker, &self.topic, *queue_id, body, None, None).await?)
    }
}

pub(crate) async fn send_msg_status(ctx: &Ctx, a: SendMsgStatusArgs) -> anyhow::Result<()> {
    let mut sender = BrokerTopicSender::new(ctx, &a.broker_name).await?;
    sender.send(ctx, &status_body(WARM_UP_SIZE)).await.context("the warm-up send failed")?;
    let body = status_body(a.message_size);
    let mut rows = Vec::new();
    for i in 0..a.count {
        let start = Instant::now();
        let result = sender.send(ctx, &body).await.with_context(|| format!("send {} of {} failed", i + 1, a.count))?;
        let rt_ms = start.elapsed().as_millis();
        if ctx.json {
            rows.push(json!({ "rt": rt_ms, "sendStatus": "SEND_OK", "msgId": result.msg_id,
                "offsetMsgId": result.offset_msg_id, "brokerName": result.broker_name, "queueId": result.queue_id,
                "queueOffset": result.queue_offset }));
        } else {
            println!("rt={rt_ms}ms, SendResult={}", java_send_result(&sender.topic, &result));
        }
    }
    if ctx.json {
        print_json(&json!(rows))?;
    }
    Ok(())
}

/// Java's body for sendMsgStatus: the unit text repeated until it reaches `size` (so up to
/// ten bytes longer).
fn status_body(size: usize) -> Vec<u8> {
    STATUS_BODY_UNIT.repeat(size.div_ceil(STATUS_BODY_UNIT.len())).into_bytes()
}

/// Java's `SendResult#toString`.
fn java_send_result(topic: &str, r: &SendResult) -> String {
    format!(
        "SendResult [sendStatus=SEND_OK, msgId={}, offsetMsgId={}, messageQueue=MessageQueue [topic={topic}, \
         brokerName={}, queueId={}], queueOffset={}, recallHandle=null]",
        r.msg_id, r.offset_msg_id, r.broker_name, r.queue_id, r.queue_offset
    )
}

/// One broker's figures of one clusterRT round.
struct BrokerRt {
    cluster: String,
    broker: String,
    rt_ms: f64,
    tps: f64,
    success: u32,
    failed: u32,
}

pub(crate) async fn cluster_rt(ctx: &Ctx, a: ClusterRtArgs) -> anyhow::Result<()> {
    if a.amount == 0 {
        anyhow::bail!("-a must be at least 1");
    }
    let info = ctx.client.cluster_info().await?;
    let clusters: Vec<(String, Vec<String>)> = match &a.cluster {
        Some(name) => {
            let brokers = info.cluster_addr_table.get(name).with_context(|| {
                let known: Vec<&str> = info.cluster_addr_table.keys().map(String::as_str).collect();
                format!("cluster {name} does not exist (known: {})", known.join(", "))
            })?;
            vec![(name.clone(), brokers.iter().cloned().collect())]
        }
        None => info.cluster_addr_table.iter().map(|(c, b)| (c.clone(), b.iter().cloned().collect())).collect(),
    };
    let total: usize = clusters.iter().map(|(_, b)| b.len()).sum();
    if total == 0 {
        anyhow::bail!("no broker to measure");
    }
    if !a.print_as_tlog && !ctx.json {
        println!(
            "{:<24}  {:<24}  {:<4}  {:<8}  {:<8}",
            "#Cluster Name", "#Broker Name", "#RT", "#successCount", "#failCount"
        );
    }
    let body = vec![b'a'; a.size];
    let mut round = 0u64;
    loop {
        round += 1;
        let mut results = Vec::new();
        let mut done = 0;
        for (cluster, brokers) in &clusters {
            for broker in brokers {
                done += 1;
                eprintln!("clusterRT: round {round}, broker {done}/{total} {cluster}/{broker}");
                let rt = measure_broker(ctx, cluster, broker, a.amount, &body).await;
                print_rt_row(ctx, &a, &rt);
                results.push(rt);
            }
        }
        if ctx.json {
            let rows: Vec<JsonValue> = results
                .iter()
                .map(|r| {
                    json!({ "round": round, "cluster": r.cluster, "brokerName": r.broker, "rt": r.rt_ms,
                        "tps": r.tps, "successCount": r.success, "failCount": r.failed })
                })
                .collect();
            print_json(&json!(rows))?;
        }
        if a.rounds != 0 && round >= a.rounds {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_secs(a.interval_secs)).await;
    }
}

/// Sends `amount` messages to the broker's topic. RT is the average send time without the
/// first send (which pays for the connection), as Java computes it; with one message it is
/// that message's.
async fn measure_broker(ctx: &Ctx, cluster: &str, broker: &str, amount: u32, body: &[u8]) -> BrokerRt {
    let mut rt = BrokerRt {
        cluster: cluster.to_owned(),
        broker: broker.to_owned(),
        rt_ms: 0.0,
        tps: 0.0,
        success: 0,
        failed: 0,
    };
    let mut sender = match BrokerTopicSender::new(ctx, broker).await {
        Ok(s) => s,
        Err(e) => {
            // As Java's producer, a broker that cannot be sent to counts every send as failed.
            eprintln!("clusterRT: {e:#}");
            rt.failed = amount;
            return rt;
        }
    };
    let (mut timed, mut first) = (Duration::ZERO, Duration::ZERO);
    let started = Instant::now();
    for i in 0..amount {
        let start = Instant::now();
        match sender.send(ctx, body).await {
            Ok(_) => rt.success += 1,
            Err(e) => {
                rt.failed += 1;
                if rt.failed == 1 {
                    eprintln!("clusterRT: send to {broker} failed: {e:#}");
                }
            }
        }
        if i == 0 {
            first = start.elapsed();
        } else {
            timed += start.elapsed();
        }
    }
    rt.rt_ms =
        if amount > 1 { timed.as_secs_f64() * 1000.0 / f64::from(amount - 1) } else { first.as_secs_f64() * 1000.0 };
    let seconds = started.elapsed().as_secs_f64();
    rt.tps = if seconds > 0.0 { f64::from(rt.success) / seconds } else { 0.0 };
    rt
}

fn print_rt_row(ctx: &Ctx, a: &ClusterRtArgs, r: &BrokerRt) {
    if ctx.json {
        return;
    }
    if a.print_as_tlog {
        // Java rounds half up to a whole millisecond here.
        println!("{}|{}|{}|{}|{}", tlog_time_now(), a.machine_room, r.cluster, r.broker, (r.rt_ms + 0.5).floor());
    } else {
        let row = format!(
            "{:<24}  {:<24}  {:<8}  {:<16}  {:<16}",
            r.cluster,
            r.broker,
            format!("{:.2}", r.rt_ms),
            r.success,
            r.failed
        );
        println!("{}", row.trim_end());
    }
}

/// Now as `yyyy-MM-dd HH:mm:ss` in GMT+8.
fn tlog_time_now() -> String {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    tlog_time(i64::try_from(now).unwrap_or(0))
}

fn tlog_time(epoch_secs: i64) -> String {
    let secs = epoch_secs + TLOG_UTC_OFFSET_SECS;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}", rem / 3600, rem % 3600 / 60, rem % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_body_repeats_the_unit_up_to_the_size() {
        assert_eq!(status_body(0), b"");
        assert_eq!(status_body(11), b"hello jodie");
        assert_eq!(status_body(12).len(), 22);
        assert_eq!(status_body(128).len(), 132);
    }

    #[test]
    fn tlog_time_is_gmt_plus_eight() {
        assert_eq!(tlog_time(1_700_000_000), "2023-11-15 06:13:20");
    }
}
