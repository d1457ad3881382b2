//! `ferromq bench topics`: what many topics and groups cost. Creates topics one by one with
//! UPDATE_AND_CREATE_TOPIC, one request at a time as a script calling `mqadmin updateTopic`
//! would, and prints the time of each chunk (a flat column means a flat per-topic cost); then
//! measures a broker registration carrying the whole topic table (body size, the name server's
//! answer time and CPU, the QUERY_DATA_VERSION shortcut that skips it) and a client heartbeat
//! listing many consumer groups.
//!
//! The registration part registers a second, fake broker (`--fake-broker-name`) with the real
//! broker's topic table and unregisters it at the end: run it against a test cluster only.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use ferromq_client::admin::{AdminClient, SubscriptionGroupConfig};
use ferromq_protocol::body::{
    ConsumerData, DataVersion, HeartbeatData, JsonBody, RegisterBrokerBody, SubscriptionData, TopicConfig,
    TopicConfigAndMappingSerializeWrapper,
};
use ferromq_protocol::header::{
    QueryDataVersionRequestHeader, RegisterBrokerRequestHeader, UnRegisterBrokerRequestHeader,
};
use ferromq_protocol::message::crc32_masked;
use ferromq_protocol::{request_code, response_code, version, RemotingCommand};
use ferromq_remoting::{ClientConfig, RemotingClient};

/// Arguments of `ferromq bench topics`.
#[derive(Debug, clap::Args)]
pub(crate) struct TopicsArgs {
    /// Name server address.
    #[arg(short = 'n', long = "namesrvAddr", default_value = "127.0.0.1:9876")]
    namesrv: String,
    /// Broker address (default: the first master the name server lists).
    #[arg(short = 'b', long = "brokerAddr")]
    broker: Option<String>,
    /// Topics to create.
    #[arg(long, default_value_t = 10_000)]
    topics: usize,
    /// Topics per reported chunk.
    #[arg(long, default_value_t = 1_000)]
    chunk: usize,
    /// Prefix of the created topics' names (`<prefix><index>`).
    #[arg(long, default_value = "BenchTopic_")]
    prefix: String,
    /// Subscription groups to create and list in one heartbeat (0: skip the heartbeat part).
    #[arg(long, default_value_t = 1_000)]
    groups: usize,
    /// Repetitions of each registration and heartbeat measurement (the median is shown).
    #[arg(long, default_value_t = 20)]
    repeat: usize,
    /// Skip the registration and heartbeat part.
    #[arg(long)]
    creation_only: bool,
    /// Pid of the name server process, to report the CPU time it spends per registration.
    #[arg(long)]
    namesrv_pid: Option<u32>,
    /// Broker name of the fake broker the registration part registers.
    #[arg(long, default_value = "bench-fake-broker")]
    fake_broker_name: String,
}

const TIMEOUT: Duration = Duration::from_secs(30);

pub(crate) async fn run(a: TopicsArgs) -> anyhow::Result<()> {
    anyhow::ensure!(a.chunk > 0, "--chunk must be positive");
    let admin = AdminClient::new(&a.namesrv).with_timeout(TIMEOUT);
    let broker = match &a.broker {
        Some(b) => b.clone(),
        None => first_master(&admin).await?,
    };
    println!("broker {broker}, name server {}", a.namesrv);
    create_topics(&admin, &broker, &a).await?;
    if !a.creation_only {
        let remoting = RemotingClient::new(ClientConfig::default());
        registration(&admin, &remoting, &broker, &a).await?;
        if a.groups > 0 {
            heartbeat(&admin, &remoting, &broker, &a).await?;
        }
        remoting.shutdown().await;
    }
    admin.shutdown().await;
    Ok(())
}

async fn first_master(admin: &AdminClient) -> anyhow::Result<String> {
    let info = admin.cluster_info().await?;
    info.broker_addr_table
        .values()
        .find_map(|b| b.broker_addrs.get(&0).cloned())
        .context("the name server lists no master broker")
}

/// Creates the topics one at a time and prints each chunk's time.
async fn create_topics(admin: &AdminClient, broker: &str, a: &TopicsArgs) -> anyhow::Result<()> {
    println!("\ncreating {} topics one by one (UPDATE_AND_CREATE_TOPIC, 8 queues)", a.topics);
    println!("{:>14} {:>10} {:>12} {:>12}", "topics", "chunk_ms", "per_topic_us", "max_us");
    let all = Instant::now();
    let mut chunk_started = Instant::now();
    let mut max = Duration::ZERO;
    for i in 0..a.topics {
        let config = TopicConfig::new(format!("{}{i}", a.prefix), 8, 8);
        let started = Instant::now();
        admin.update_topic(broker, &config, "").await.with_context(|| format!("creating {}", config.topic_name))?;
        max = max.max(started.elapsed());
        let done = i + 1;
        if done % a.chunk == 0 || done == a.topics {
            let took = chunk_started.elapsed();
            let in_chunk = (done - 1) % a.chunk + 1;
            println!(
                "{:>14} {:>10.0} {:>12.0} {:>12}",
                format!("{}-{}", done - in_chunk + 1, done),
                took.as_secs_f64() * 1e3,
                took.as_secs_f64() * 1e6 / in_chunk as f64,
                max.as_micros()
            );
            chunk_started = Instant::now();
            max = Duration::ZERO;
        }
    }
    println!("total {:.2} s", all.elapsed().as_secs_f64());
    if a.topics > 0 {
        let last = format!("{}{}", a.prefix, a.topics - 1);
        let route = admin.topic_route(&last).await.with_context(|| format!("route of {last}"))?;
        anyhow::ensure!(!route.queue_datas.is_empty(), "the name server has no queues for {last}");
    }
    Ok(())
}

/// A broker registration carrying `broker`'s topic table, sent as a fake broker: body sizes,
/// the name server's answer times (first, unchanged and changed version) and QUERY_DATA_VERSION.
async fn registration(
    admin: &AdminClient,
    remoting: &RemotingClient,
    broker: &str,
    a: &TopicsArgs,
) -> anyhow::Result<()> {
    let table = admin.all_topic_config(broker).await?;
    let fake_addr = "127.0.0.1:1".to_owned();
    let cluster = "BenchFakeCluster".to_owned();
    let mut version = DataVersion::now();
    let body = |version: DataVersion, compressed: bool| {
        RegisterBrokerBody {
            filter_server_list: Vec::new(),
            topic_config_serialize_wrapper: TopicConfigAndMappingSerializeWrapper {
                data_version: version,
                topic_config_table: table.topic_config_table.clone(),
                ..Default::default()
            },
        }
        .encode(compressed, version::CURRENT)
    };
    let request = |body: Vec<u8>, compressed: bool| {
        RemotingCommand::request(request_code::REGISTER_BROKER)
            .with_header(&RegisterBrokerRequestHeader {
                broker_name: a.fake_broker_name.clone(),
                broker_addr: fake_addr.clone(),
                cluster_name: cluster.clone(),
                ha_server_addr: String::new(),
                broker_id: 0,
                heartbeat_timeout_millis: None,
                enable_acting_master: Some(false),
                compressed: Some(compressed),
                body_crc32: Some(crc32_masked(&body) as i32),
            })
            .with_body(body)
    };
    let encode_started = Instant::now();
    let plain = body(version, false);
    let encode_ms = encode_started.elapsed().as_secs_f64() * 1e3;
    let compressed_len = body(version, true).len();
    println!(
        "\nregistration with {} topics: body {} bytes ({} compressed), encoded in {encode_ms:.1} ms",
        table.topic_config_table.len(),
        plain.len(),
        compressed_len
    );
    println!("{:>34} {:>10} {:>16}", "request", "median_ms", "namesrv_cpu_ms");
    let cpu = |pid: Option<u32>| pid.and_then(process_cpu_ms);
    let mut first = true;
    for (label, bump, compressed) in [
        ("REGISTER_BROKER, version changed", true, false),
        ("REGISTER_BROKER, same version", false, false),
        ("REGISTER_BROKER compressed, changed", true, true),
    ] {
        let mut times = Vec::with_capacity(a.repeat);
        let cpu_before = cpu(a.namesrv_pid);
        for _ in 0..a.repeat.max(1) {
            if bump || first {
                version.next_version();
            }
            first = false;
            let req = request(body(version, compressed), compressed);
            let started = Instant::now();
            let r = remoting.invoke(&a.namesrv, req, TIMEOUT).await?;
            times.push(started.elapsed());
            anyhow::ensure!(r.code == response_code::SUCCESS, "registration refused: {:?}", r.remark);
        }
        print_row(label, &mut times, cpu_before, cpu(a.namesrv_pid), a.repeat.max(1));
    }
    let mut times = Vec::with_capacity(a.repeat);
    let cpu_before = cpu(a.namesrv_pid);
    for _ in 0..a.repeat.max(1) {
        let req = RemotingCommand::request(request_code::QUERY_DATA_VERSION)
            .with_header(&QueryDataVersionRequestHeader {
                broker_name: a.fake_broker_name.clone(),
                broker_addr: fake_addr.clone(),
                cluster_name: cluster.clone(),
                broker_id: 0,
            })
            .with_body(version.encode());
        let started = Instant::now();
        let r = remoting.invoke(&a.namesrv, req, TIMEOUT).await?;
        times.push(started.elapsed());
        anyhow::ensure!(r.code == response_code::SUCCESS, "data version query refused: {:?}", r.remark);
    }
    print_row("QUERY_DATA_VERSION (unchanged)", &mut times, cpu_before, cpu(a.namesrv_pid), a.repeat.max(1));
    let unregister =
        RemotingCommand::request(request_code::UNREGISTER_BROKER).with_header(&UnRegisterBrokerRequestHeader {
            broker_name: a.fake_broker_name.clone(),
            broker_addr: fake_addr,
            cluster_name: cluster,
            broker_id: 0,
        });
    remoting.invoke(&a.namesrv, unregister, TIMEOUT).await?;
    Ok(())
}

/// Creates the subscription groups, then sends heartbeats listing all of them (one consumer
/// group per subscription group, each subscribing to one of the created topics).
async fn heartbeat(admin: &AdminClient, remoting: &RemotingClient, broker: &str, a: &TopicsArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    for g in 0..a.groups {
        admin.create_subscription_group(broker, &SubscriptionGroupConfig::new(format!("BenchGroup_{g}"))).await?;
    }
    println!(
        "\n{} subscription groups created one by one in {:.0} ms",
        a.groups,
        started.elapsed().as_secs_f64() * 1e3
    );
    let data = HeartbeatData {
        client_id: format!("127.0.0.1@bench-{}", std::process::id()),
        consumer_data_set: (0..a.groups)
            .map(|g| ConsumerData {
                group_name: format!("BenchGroup_{g}"),
                subscription_data_set: vec![SubscriptionData {
                    topic: format!("{}{}", a.prefix, g % a.topics.max(1)),
                    sub_string: "*".to_owned(),
                    ..SubscriptionData::default()
                }],
                ..ConsumerData::default()
            })
            .collect(),
        ..HeartbeatData::default()
    };
    let body = data.encode();
    println!("heartbeat listing {} consumer groups: body {} bytes", a.groups, body.len());
    println!("{:>34} {:>10} {:>16}", "request", "median_ms", "namesrv_cpu_ms");
    for label in ["HEART_BEAT, first (registers)", "HEART_BEAT, repeated"] {
        let rounds = if label.contains("first") { 1 } else { a.repeat.max(1) };
        let mut times = Vec::with_capacity(rounds);
        for _ in 0..rounds {
            let req = RemotingCommand::request(request_code::HEART_BEAT).with_body(body.clone());
            let started = Instant::now();
            let r = remoting.invoke(broker, req, TIMEOUT).await?;
            times.push(started.elapsed());
            anyhow::ensure!(r.code == response_code::SUCCESS, "heartbeat refused: {:?}", r.remark);
        }
        print_row(label, &mut times, None, None, rounds);
    }
    Ok(())
}

fn print_row(label: &str, times: &mut [Duration], cpu_before: Option<f64>, cpu_after: Option<f64>, n: usize) {
    times.sort();
    let median = times.get(times.len() / 2).copied().unwrap_or_default();
    let cpu = match (cpu_before, cpu_after) {
        (Some(b), Some(a)) => format!("{:.2}", (a - b) / n as f64),
        _ => "-".to_owned(),
    };
    println!("{label:>34} {:>10.2} {cpu:>16}", median.as_secs_f64() * 1e3);
}

/// User plus system CPU milliseconds `pid` has used (Linux `/proc/<pid>/stat`).
fn process_cpu_ms(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the parenthesised command name; utime and stime are the 12th and 13th.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    // USER_HZ is 100 on every Linux platform Rust supports.
    Some(ticks * 10.0)
}
