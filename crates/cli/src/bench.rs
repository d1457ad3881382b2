//! `ferromq bench produce|consume|e2e`: the load tool (see the `ferromq-bench` crate). Option
//! letters follow RocketMQ's `benchmark/Producer.java` where they exist.

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
    Produce(BenchOptions),
    /// Pull every queue of the topic and measure end-to-end latency.
    Consume(BenchOptions),
    /// Produce and consume at once.
    E2e(BenchOptions),
}

#[derive(Debug, clap::Args)]
struct BenchOptions {
    /// Name server address.
    #[arg(short = 'n', long = "namesrv", default_value = "127.0.0.1:9876")]
    namesrv: String,
    /// Broker address: skip the name server (use --queues for the queue count).
    #[arg(long)]
    broker: Option<String>,
    /// Topic (created on the broker serving TBW102 if missing).
    #[arg(short = 't', long, default_value = "FerroBench")]
    topic: String,
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
    /// Total messages to send (produce) or receive (consume); 0 = no count limit.
    #[arg(short = 'q', long = "messageQuantity", default_value_t = 0)]
    count: u64,
    /// Time limit in seconds.
    #[arg(long, default_value_t = 10)]
    duration: u64,
    /// Consume from offset 0 instead of the queues' current max.
    #[arg(long)]
    from_start: bool,
    /// Consumer group.
    #[arg(short = 'g', long, default_value = "ferro_bench_consumer")]
    group: String,
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
}

/// Runs the load tool.
pub(crate) fn run(args: BenchArgs) -> anyhow::Result<()> {
    let (mode, o) = match args.mode {
        BenchMode::Produce(o) => (Mode::Produce, o),
        BenchMode::Consume(o) => (Mode::Consume, o),
        BenchMode::E2e(o) => (Mode::E2e, o),
    };
    let opts = Options {
        mode,
        namesrv: Some(o.namesrv),
        broker: o.broker,
        topic: o.topic,
        in_flight: o.in_flight,
        connections: o.connections,
        message_size: o.size,
        keys: o.keys,
        batch: o.batch,
        oneway: o.oneway,
        count: o.count,
        duration: Duration::from_secs(o.duration),
        from_start: o.from_start,
        group: o.group,
        queues: o.queues,
        timeout: Duration::from_millis(o.timeout_ms),
        progress: !o.quiet,
    };
    let runtime =
        tokio::runtime::Builder::new_multi_thread().enable_all().build().context("cannot start the async runtime")?;
    let report = runtime.block_on(ferromq_bench::run(opts, std::env::args().collect()))?;
    print!("{}", report.table());
    if let Some(path) = &o.json {
        std::fs::write(path, report.to_json()).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}
