//! `ferromq bench produce|consume|e2e|pop|revive|topics`: the load tool (see the `ferromq-bench` crate). Option
//! letters follow RocketMQ's `benchmark/Producer.java` where they exist.

use std::io::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use ferromq_bench::{Mode, Options};

/// Arguments of `ferromq bench`.
#[derive(Debug, clap::Args)]
pub(crate) struct BenchArgs {
    #[command(subcommand)]
    mode: BenchMode,
}

#[derive(Debug, clap::Subcommand)]
enum BenchMode {
    /// Send messages as fast as the in-flight limit allows.
    Produce(ProduceArgs),
    /// Pull every queue of the topic and measure end-to-end latency (new messages only, unless
    /// --from-start reads the backlog).
    Consume(ConsumeArgs),
    /// Produce and consume at once.
    E2e(E2eArgs),
    /// How soon after SEND_OK the first message of a new topic can be pulled.
    Visibility(VisibilityArgs),
    /// Pop the topic (queue id -1, 32 per request) as a 5.x consumer group and acknowledge
    /// every message; compare with `consume --from-start` on the same backlog.
    Pop(PopArgs),
    /// Pop messages without acknowledging them and measure how late after their invisible
    /// time they come back.
    Revive(ReviveArgs),
    /// Send over gRPC to a 5.x proxy (SendMessage, one in flight per caller).
    GrpcProduce(GrpcArgs),
    /// Receive over gRPC from a 5.x proxy (batch 32) and acknowledge every message.
    GrpcReceive(GrpcArgs),
    /// Create topics one by one and time each chunk; then measure a registration carrying
    /// the whole topic table and a heartbeat listing many groups.
    Topics(crate::bench_topics::TopicsArgs),
}

#[derive(Debug, clap::Args)]
struct GrpcArgs {
    /// The proxy's gRPC address.
    #[arg(long, default_value = "127.0.0.1:8081")]
    endpoint: String,
    /// Topic (create it first: admin updateTopic -a +message.type=NORMAL).
    #[arg(short = 't', long, default_value = "FerroBench")]
    topic: String,
    /// Consumer group (grpc-receive).
    #[arg(short = 'g', long, default_value = "ferro_bench_grpc")]
    group: String,
    /// Concurrent callers.
    #[arg(short = 'w', long = "threadCount", default_value_t = 64)]
    concurrency: u32,
    /// HTTP/2 connections the unary calls (SendMessage, AckMessage) are spread over (one 5.x
    /// client has one; `produce` uses 4 remoting connections).
    #[arg(long, default_value_t = 1)]
    connections: u32,
    /// Body size in bytes.
    #[arg(short = 's', long = "messageSize", default_value_t = 1024)]
    size: usize,
    /// Time limit in seconds.
    #[arg(long, default_value_t = 10)]
    duration: u64,
    /// Total messages; 0 = only the time limit.
    #[arg(short = 'q', long = "messageQuantity", default_value_t = 0)]
    count: u64,
    /// Write the JSON result here.
    #[arg(long)]
    json: Option<PathBuf>,
}

async fn grpc(a: GrpcArgs, receive: bool) -> anyhow::Result<()> {
    let max = ferromq_bench::limits::MAX_CONNECTIONS;
    anyhow::ensure!((1..=max).contains(&a.connections), "--connections must be 1..={max}, not {}", a.connections);
    let opts = ferromq_bench::grpc::GrpcOptions {
        endpoint: a.endpoint,
        topic: a.topic,
        group: a.group,
        concurrency: a.concurrency,
        connections: a.connections,
        body_bytes: a.size,
        duration: Duration::from_secs(a.duration),
        count: a.count,
    };
    let r =
        if receive { ferromq_bench::grpc::receive(&opts).await? } else { ferromq_bench::grpc::produce(&opts).await? };
    println!(
        "{} ok {} failed {} in {:.2}s: {:.0} msgs/s, latency us p50 {} p99 {}{}",
        if receive { "grpc-receive" } else { "grpc-produce" },
        r.ok,
        r.failed,
        r.elapsed_s,
        r.msgs_per_s,
        r.latency_us.p50,
        r.latency_us.p99,
        r.first_error.as_deref().map(|e| format!(" (first error: {e})")).unwrap_or_default()
    );
    if let Some(path) = &a.json {
        std::fs::write(path, r.to_json()).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

#[derive(Debug, clap::Args)]
struct PopArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Pops in flight (each with its acks).
    #[arg(short = 'w', long = "threadCount", default_value_t = 4)]
    in_flight: u32,
    /// Consumer group (a new group starts at the backlog's beginning).
    #[arg(short = 'g', long, default_value = "ferro_bench_pop")]
    group: String,
    /// Total messages to pop and ack; 0 = only the time limit.
    #[arg(short = 'q', long = "messageQuantity", default_value_t = 0)]
    count: u64,
    /// Acknowledge each pop's messages with one BATCH_ACK_MESSAGE.
    #[arg(long)]
    batch_ack: bool,
}

#[derive(Debug, clap::Args)]
struct ReviveArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Consumer group (a new group starts at the backlog's beginning).
    #[arg(short = 'g', long, default_value = "ferro_bench_revive")]
    group: String,
    /// Messages to pop and leave unacknowledged.
    #[arg(short = 'q', long = "messageQuantity", default_value_t = 100_000)]
    count: u64,
    /// Invisible time of the pops, ms.
    #[arg(long, default_value_t = 10_000)]
    invisible_ms: u64,
}

/// Options every load mode takes.
#[derive(Debug, clap::Args)]
struct CommonArgs {
    /// Name server address.
    #[arg(short = 'n', long = "namesrv", default_value = "127.0.0.1:9876")]
    namesrv: String,
    /// Broker address: skip the name server (use --queues for the queue count).
    #[arg(long)]
    broker: Option<String>,
    /// Topic (created on the broker serving TBW102 if missing).
    #[arg(short = 't', long, default_value = "FerroBench")]
    topic: String,
    /// Time limit in seconds.
    #[arg(long, default_value_t = 10)]
    duration: u64,
    /// Connections to the broker.
    #[arg(long, default_value_t = 4)]
    connections: u32,
    /// Queues when creating the topic (or the queue count with --broker).
    #[arg(long, default_value_t = 8)]
    queues: u32,
    /// Per-request timeout in milliseconds.
    #[arg(long, default_value_t = 3000)]
    timeout_ms: u64,
    /// Write the JSON report here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// No progress line on stderr.
    #[arg(long)]
    quiet: bool,
    /// Connect with TLS (trusting any server certificate, unless /etc/rocketmq/tls.properties
    /// says otherwise), as a Java client with `useTLS=true`.
    #[arg(long)]
    tls: bool,
    /// Sign every request with this access key (brokers with ACL on).
    #[arg(long = "accessKey", requires = "secret_key")]
    access_key: Option<String>,
    /// The secret key that goes with --accessKey.
    #[arg(long = "secretKey", requires = "access_key")]
    secret_key: Option<String>,
}

impl CommonArgs {
    fn credentials(&self) -> Option<ferromq_protocol::signature::SessionCredentials> {
        match (&self.access_key, &self.secret_key) {
            (Some(ak), Some(sk)) => Some(ferromq_protocol::signature::SessionCredentials::new(ak.clone(), sk.clone())),
            _ => None,
        }
    }
}

/// What the sending side takes.
#[derive(Debug, clap::Args)]
struct SendArgs {
    /// Requests in flight (sender tasks, one outstanding request each).
    #[arg(short = 'w', long = "threadCount", default_value_t = 64)]
    in_flight: u32,
    /// Message body size in bytes.
    #[arg(short = 's', long = "messageSize", default_value_t = 128)]
    size: u32,
    /// Attach a KEYS property to every message.
    #[arg(short = 'k', long = "keyEnable")]
    keys: bool,
    /// Messages per request: more than 1 sends SEND_BATCH_MESSAGE.
    #[arg(short = 'b', long = "batchSize", default_value_t = 1)]
    batch: u32,
    /// Send oneway (no response; acked means written, latency is the write time).
    #[arg(short = 'y', long = "oneway")]
    oneway: bool,
    /// Dispatch every message to this many light queues (INNER_MULTI_DISPATCH; the broker
    /// needs enableLmq=true and enableMultiDispatch=true).
    #[arg(long = "lmqFanout", default_value_t = 0)]
    lmq_fanout: u32,
    /// Distinct light queues (%LMQ%ferro-bench-<n>) the targets cycle through.
    #[arg(long = "lmqQueues", default_value_t = 1000)]
    lmq_queues: u64,
}

#[derive(Debug, clap::Args)]
struct ProduceArgs {
    #[command(flatten)]
    common: CommonArgs,
    #[command(flatten)]
    send: SendArgs,
    /// Total messages to send; 0 = only the time limit.
    #[arg(short = 'q', long = "messageQuantity", default_value_t = 0)]
    count: u64,
}

#[derive(Debug, clap::Args)]
struct ConsumeArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Read from each queue's oldest message (a backlog) instead of its current end (only
    /// messages sent from now on).
    #[arg(long)]
    from_start: bool,
    /// Consumer group.
    #[arg(short = 'g', long, default_value = "ferro_bench_consumer")]
    group: String,
    /// Total messages to receive; 0 = only the time limit.
    #[arg(short = 'q', long = "messageQuantity", default_value_t = 0)]
    count: u64,
}

#[derive(Debug, clap::Args)]
struct E2eArgs {
    #[command(flatten)]
    common: CommonArgs,
    #[command(flatten)]
    send: SendArgs,
    /// Consumer group.
    #[arg(short = 'g', long, default_value = "ferro_bench_consumer")]
    group: String,
    /// Total messages to send; 0 = only the time limit.
    #[arg(short = 'q', long = "messageQuantity", default_value_t = 0)]
    count: u64,
}

#[derive(Debug, clap::Args)]
struct VisibilityArgs {
    /// Name server address.
    #[arg(short = 'n', long = "namesrv", default_value = "127.0.0.1:9876")]
    namesrv: String,
    /// New topics to send a first message to, one after another.
    #[arg(long, default_value_t = 10)]
    samples: u32,
    /// Prefix of the new topics' names.
    #[arg(long, default_value = "FerroVisibility")]
    prefix: String,
    /// Per-request timeout (and longest wait for a message) in milliseconds.
    #[arg(long, default_value_t = 3000)]
    timeout_ms: u64,
}

fn single_thread() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread().enable_all().build().context("cannot start the async runtime")
}

/// Runs the load tool.
pub(crate) fn run(args: BenchArgs) -> anyhow::Result<()> {
    let runtime =
        tokio::runtime::Builder::new_multi_thread().enable_all().build().context("cannot start the async runtime")?;
    let batch_ack = matches!(&args.mode, BenchMode::Pop(a) if a.batch_ack);
    let (mode, common, send, from_start, group, count) = match args.mode {
        BenchMode::Produce(a) => (Mode::Produce, a.common, Some(a.send), false, None, a.count),
        BenchMode::Consume(a) => (Mode::Consume, a.common, None, a.from_start, Some(a.group), a.count),
        BenchMode::E2e(a) => (Mode::E2e, a.common, Some(a.send), false, Some(a.group), a.count),
        BenchMode::Visibility(a) => return runtime.block_on(visibility(a)),
        BenchMode::Revive(a) => return runtime.block_on(revive(a)),
        BenchMode::Topics(a) => return runtime.block_on(crate::bench_topics::run(a)),
        // One HTTP/2 connection, as a 5.x client has: its connection task and the callers on
        // one thread, so requests queued in one turn go out in one write.
        BenchMode::GrpcProduce(a) => return single_thread()?.block_on(grpc(a, false)),
        BenchMode::GrpcReceive(a) => return single_thread()?.block_on(grpc(a, true)),
        BenchMode::Pop(a) => {
            let send = SendArgs {
                in_flight: a.in_flight,
                size: 0,
                keys: false,
                batch: 1,
                oneway: false,
                lmq_fanout: 0,
                lmq_queues: 0,
            };
            (Mode::Pop, a.common, Some(send), true, Some(a.group), a.count)
        }
    };
    let defaults = Options::default();
    let send = send.unwrap_or(SendArgs {
        in_flight: defaults.in_flight,
        size: defaults.message_size,
        keys: false,
        batch: 1,
        oneway: false,
        lmq_fanout: 0,
        lmq_queues: defaults.lmq_queues,
    });
    let credentials = common.credentials();
    let opts = Options {
        mode,
        namesrv: Some(common.namesrv),
        broker: common.broker,
        topic: common.topic,
        in_flight: send.in_flight,
        connections: common.connections,
        message_size: send.size.max(1),
        keys: send.keys,
        lmq_fanout: send.lmq_fanout,
        lmq_queues: send.lmq_queues,
        batch: send.batch,
        oneway: send.oneway,
        count,
        duration: Duration::from_secs(common.duration),
        from_start,
        group: group.unwrap_or(defaults.group),
        queues: common.queues,
        timeout: Duration::from_millis(common.timeout_ms),
        progress: !common.quiet,
        pop_batch_ack: batch_ack,
        tls: crate::client_tls(common.tls)?,
        credentials,
    };
    let report = runtime.block_on(ferromq_bench::run(opts, std::env::args().collect()))?;
    print!("{}", report.table());
    if let Some(path) = &common.json {
        std::fs::write(path, report.to_json()).with_context(|| format!("cannot write {}", path.display()))?;
    }
    if mode == Mode::Consume && report.consume.as_ref().is_some_and(|c| c.consumed == 0) && !from_start {
        let _ = writeln!(
            std::io::stderr(),
            "read 0 messages: consume starts at each queue's end and waits for new ones; to measure a backlog \
             already in the topic, add --from-start"
        );
    }
    Ok(())
}

async fn revive(a: ReviveArgs) -> anyhow::Result<()> {
    let credentials = a.common.credentials();
    let opts = Options {
        namesrv: Some(a.common.namesrv),
        broker: a.common.broker,
        topic: a.common.topic,
        group: a.group,
        queues: a.common.queues,
        timeout: Duration::from_millis(a.common.timeout_ms),
        progress: false,
        tls: crate::client_tls(a.common.tls)?,
        credentials,
        ..Options::default()
    };
    let invisible = Duration::from_millis(a.invisible_ms);
    let limit = Duration::from_secs(a.common.duration) + invisible * 2;
    let r = ferromq_bench::pop::revive_lateness(opts, a.count, invisible, limit).await?;
    let l = &r.lateness_ms;
    println!(
        "popped {} unacknowledged, {} back within {:?}; lateness past invisible time ms: p50 {} p90 {} p99 {} max {}",
        r.popped, r.returned, limit, l.p50, l.p90, l.p99, l.max
    );
    if let Some(e) = r.first_error {
        println!("first error: {e}");
    }
    Ok(())
}

async fn visibility(a: VisibilityArgs) -> anyhow::Result<()> {
    let samples =
        ferromq_bench::visibility::probe(&a.namesrv, &a.prefix, a.samples, Duration::from_millis(a.timeout_ms)).await?;
    let mut out = std::io::stdout();
    let _ = writeln!(out, "{:<40} {:>10} {:>12} {:>12}", "topic", "send_us", "visible_us", "empty_pulls");
    for s in &samples {
        let _ = writeln!(
            out,
            "{:<40} {:>10} {:>12} {:>12}",
            s.topic,
            s.send.as_micros(),
            s.visible.as_micros(),
            s.empty_pulls
        );
    }
    let mut visible: Vec<u128> = samples.iter().map(|s| s.visible.as_micros()).collect();
    visible.sort_unstable();
    let _ = writeln!(
        out,
        "first message visible {} us after SEND_OK; median of {} new topics {} us, max {} us",
        samples[0].visible.as_micros(),
        samples.len(),
        visible[visible.len() / 2],
        visible[visible.len() - 1]
    );
    Ok(())
}
