//! `rust5-compat`: one scenario of the official Apache RocketMQ Rust 5.x client (crate
//! `rocketmq` 5.0.0) against a gRPC proxy, FerroMQ's in the tests
//! (`crates/cli/tests/rust5_client.rs`). Exit code 0: every check held; 1: a check failed (the
//! line `FAIL ...` says what was expected and what came); 2: bad arguments or environment.
//!
//! ```text
//! rust5-compat --endpoint 127.0.0.1:8081 --tls on|off --scenario NAME --topic T [--group G]
//! ```
//!
//! The topic (and, for `consume-fifo-group`, the orderly consumer group) must exist: the
//! harness creates them with the admin CLI. Every check prints what it expected and what it got.
//!
//! What the crate offers, and so what is tested: `Producer` (normal, FIFO, delay and
//! transactional messages, with a `TransactionChecker` for the server's check-back) and
//! `SimpleConsumer` (receive with a batch size and an invisible duration, ack). It has no push
//! consumer and no ChangeInvisibleDuration, so those are not tested here.
//!
//! TLS: `ClientOption::set_enable_tls(true)` makes the client dial `https://` through tonic's
//! default TLS, which checks the server's certificate against the system roots (tonic's
//! `tls-roots`, read by rustls-native-certs, which honours `SSL_CERT_FILE`); the crate has no
//! way to trust any certificate as the Java client does. A self-signed certificate is
//! therefore pinned: `--tls on` first reads the server's certificate in a handshake that
//! trusts anything, writes it as PEM and points `SSL_CERT_FILE` at it, so the client's own TLS
//! stack verifies and uses it. Scenario `tls-unpinned` shows the client refusing the
//! certificate without that.

use std::collections::HashMap;
use std::fmt::Debug;
use std::io::Write as _;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rocketmq::conf::{ClientOption, ProducerOption, SimpleConsumerOption};
use rocketmq::error::ClientError;
use rocketmq::model::common::{FilterExpression, FilterType};
use rocketmq::model::message::{MessageBuilder, MessageView};
use rocketmq::model::transaction::{Transaction, TransactionResolution};
use rocketmq::{Producer, SimpleConsumer};

/// Request timeout of unary calls (the client's default).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(3);
/// The client's receive long polling, which is also the whole deadline of a receive call in
/// rocketmq 5.0.0 (`Session::receive_message` sets the timeout to it, not to it plus the
/// request timeout). The proxy polls at least `grpcClientConsumerMinLongPollingTimeoutMillis`
/// (5 s) and keeps 100 ms of the deadline in reserve, so anything up to 5.1 s is refused.
const LONG_POLLING: Duration = Duration::from_secs(6);
/// The smallest invisible duration the proxy accepts (`minInvisibleTimeMillsForRecv`).
const INVISIBLE: Duration = Duration::from_secs(10);
/// Upper bound of any one wait for a message that should come.
const ARRIVAL_BOUND: Duration = Duration::from_secs(30);

const SCENARIOS: &[&str] = &[
    "send-normal",
    "send-fifo",
    "consume-fifo-group",
    "send-delay",
    "transaction-commit",
    "transaction-rollback",
    "transaction-check",
    "transaction-commit-after-check",
    "receive-ack",
    "redelivery",
    "tls-unpinned",
];

struct Args {
    endpoint: String,
    tls: bool,
    scenario: String,
    topic: String,
    group: String,
}

fn usage() -> String {
    format!(
        "usage: rust5-compat --endpoint HOST:PORT --tls on|off --scenario NAME --topic TOPIC [--group GROUP]\n\
         scenarios: {}",
        SCENARIOS.join(", ")
    )
}

fn parse_args() -> Result<Args, String> {
    let mut map = HashMap::new();
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let Some(name) = flag.strip_prefix("--") else {
            return Err(format!("unexpected argument {flag:?}"));
        };
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        map.insert(name.to_owned(), value);
    }
    let mut take = |k: &str| map.remove(k).ok_or_else(|| format!("--{k} is required"));
    let endpoint = take("endpoint")?;
    let tls = match take("tls")?.as_str() {
        "on" => true,
        "off" => false,
        other => return Err(format!("--tls must be on or off, not {other:?}")),
    };
    let scenario = take("scenario")?;
    if !SCENARIOS.contains(&scenario.as_str()) {
        return Err(format!("unknown scenario {scenario:?}"));
    }
    let topic = take("topic")?;
    let group = map.remove("group").unwrap_or_else(|| format!("GID_{topic}"));
    if let Some(k) = map.keys().next() {
        return Err(format!("unknown option --{k}"));
    }
    Ok(Args { endpoint, tls, scenario, topic, group })
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("rust5-compat: {e}\n{}", usage());
            return ExitCode::from(2);
        }
    };
    let label = format!("[{} tls={}]", args.scenario, if args.tls { "on" } else { "off" });
    // The certificate is pinned before the runtime's threads exist: `set_var` is only sound
    // while no other thread reads the environment.
    let mut pinned_file = None;
    if args.tls && args.scenario != "tls-unpinned" {
        let pinned = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())
            .and_then(|rt| rt.block_on(pin_server_certificate(&args.endpoint)));
        match pinned {
            Ok(path) => {
                println!("{label} pinned the server's certificate: SSL_CERT_FILE={path}");
                pinned_file = Some(path);
            }
            Err(e) => {
                println!("{label} FAIL: could not read the server's TLS certificate: {e}");
                return ExitCode::from(1);
            }
        }
    } else if args.tls {
        std::env::remove_var("SSL_CERT_FILE");
    }
    let rt = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("rust5-compat: cannot start tokio: {e}");
            return ExitCode::from(2);
        }
    };
    let started = Instant::now();
    let outcome = rt.block_on(async {
        let ctx = Ctx { label: label.clone(), args };
        match tokio::time::timeout(Duration::from_secs(120), run(&ctx)).await {
            Ok(r) => r,
            Err(_) => Err("the scenario did not finish within 120 s".to_owned()),
        }
    });
    // Clients' background tasks (heartbeats, telemetry) must not keep the process alive.
    rt.shutdown_timeout(Duration::from_secs(2));
    if let Some(path) = pinned_file {
        let _ = std::fs::remove_file(path);
    }
    let took = started.elapsed().as_secs_f64();
    match outcome {
        Ok(()) => {
            println!("{label} PASS ({took:.1} s)");
            ExitCode::SUCCESS
        }
        Err(e) => {
            println!("{label} FAIL ({took:.1} s): {e}");
            ExitCode::from(1)
        }
    }
}

struct Ctx {
    label: String,
    args: Args,
}

type Outcome = Result<(), String>;

impl Ctx {
    fn log(&self, text: impl AsRef<str>) {
        println!("{} {}", self.label, text.as_ref());
        let _ = std::io::stdout().flush();
    }

    /// One check: prints what was expected and what came, and fails the scenario if they differ.
    fn check<T: PartialEq + Debug>(&self, what: &str, expected: T, got: T) -> Outcome {
        if expected == got {
            self.log(format!("ok   {what}: expected {expected:?}, got {got:?}"));
            Ok(())
        } else {
            self.log(format!("FAIL {what}: expected {expected:?}, got {got:?}"));
            Err(format!("{what}: expected {expected:?}, got {got:?}"))
        }
    }

    /// A check of a condition described in words.
    fn check_that(&self, what: &str, expected: &str, got: String, holds: bool) -> Outcome {
        if holds {
            self.log(format!("ok   {what}: expected {expected}, got {got}"));
            Ok(())
        } else {
            self.log(format!("FAIL {what}: expected {expected}, got {got}"));
            Err(format!("{what}: expected {expected}, got {got}"))
        }
    }

    fn client_option(&self) -> ClientOption {
        let mut o = ClientOption::default();
        o.set_access_url(&self.args.endpoint);
        o.set_enable_tls(self.args.tls);
        o.set_timeout(REQUEST_TIMEOUT);
        o.set_long_polling_timeout(LONG_POLLING);
        o
    }

    fn topic(&self) -> &str {
        &self.args.topic
    }

    async fn producer(&self) -> Result<Producer, String> {
        let mut option = ProducerOption::default();
        option.set_topics(vec![self.topic()]);
        let mut p = Producer::new(option, self.client_option()).map_err(|e| describe("Producer::new", &e))?;
        p.start().await.map_err(|e| describe("Producer::start", &e))?;
        self.log("producer started");
        Ok(p)
    }

    async fn transaction_producer(&self, checker: Checker) -> Result<Producer, String> {
        let mut option = ProducerOption::default();
        option.set_topics(vec![self.topic()]);
        let calls = checker.calls.clone();
        let answer = checker.answer;
        let label = self.label.clone();
        let mut p = Producer::new_transaction_producer(
            option,
            self.client_option(),
            Box::new(move |transaction_id, message: MessageView| {
                println!(
                    "{label} checker called: transaction_id={transaction_id} message_id={} answering {answer:?}",
                    message.message_id()
                );
                calls.lock().unwrap().push((transaction_id, message.message_id().to_owned(), Instant::now()));
                answer.resolution()
            }),
        )
        .map_err(|e| describe("Producer::new_transaction_producer", &e))?;
        p.start().await.map_err(|e| describe("Producer::start (transactional)", &e))?;
        self.log("transaction producer started");
        Ok(p)
    }

    async fn consumer(&self) -> Result<SimpleConsumer, String> {
        let mut option = SimpleConsumerOption::default();
        option.set_topics(vec![self.topic()]);
        option.set_consumer_group(&self.args.group);
        let mut c = SimpleConsumer::new(option, self.client_option()).map_err(|e| describe("SimpleConsumer::new", &e))?;
        c.start().await.map_err(|e| describe("SimpleConsumer::start", &e))?;
        self.log(format!("simple consumer started (group {})", self.args.group));
        Ok(c)
    }

    /// One receive call, bounded. An error is returned as such (the caller decides).
    async fn receive_once(&self, c: &SimpleConsumer, batch: i32) -> Result<Vec<MessageView>, String> {
        let filter = FilterExpression::new(FilterType::Tag, "*");
        let call = c.receive_with(self.topic(), &filter, batch, INVISIBLE);
        match tokio::time::timeout(LONG_POLLING + REQUEST_TIMEOUT, call).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(describe("SimpleConsumer::receive_with", &e)),
            Err(_) => Err(format!("receive_with did not return within {:?}", LONG_POLLING + REQUEST_TIMEOUT)),
        }
    }

    /// Receives until `want` messages came or `bound` passed; receive errors are printed and
    /// retried (a failing receive keeps failing until the bound, and the last error is kept).
    async fn receive_until(&self, c: &SimpleConsumer, want: usize, bound: Duration) -> (Vec<Received>, Option<String>) {
        let deadline = Instant::now() + bound;
        let (mut got, mut last_error) = (Vec::new(), None);
        while got.len() < want && Instant::now() < deadline {
            match self.receive_once(c, 32).await {
                Ok(batch) => {
                    for m in batch {
                        self.log(format!(
                            "received message_id={} attempt={} group={:?} body={:?}",
                            m.message_id(),
                            m.delivery_attempt(),
                            m.message_group(),
                            String::from_utf8_lossy(m.body())
                        ));
                        got.push(Received { at: Instant::now(), wall: SystemTime::now(), view: m });
                    }
                }
                Err(e) => {
                    self.log(format!("receive failed (retrying until the bound): {e}"));
                    last_error = Some(e);
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }
        (got, last_error)
    }

    /// Receives for `window` and returns whatever came (for checks that nothing comes).
    async fn receive_for(&self, c: &SimpleConsumer, window: Duration) -> Result<Vec<Received>, String> {
        let deadline = Instant::now() + window;
        let mut got = Vec::new();
        let mut errors = 0;
        while Instant::now() < deadline {
            match self.receive_once(c, 32).await {
                Ok(batch) => got.extend(batch.into_iter().map(|view| {
                    self.log(format!("received message_id={} attempt={}", view.message_id(), view.delivery_attempt()));
                    Received { at: Instant::now(), wall: SystemTime::now(), view }
                })),
                Err(e) => {
                    errors += 1;
                    self.log(format!("receive failed: {e}"));
                    if errors >= 3 {
                        return Err(format!("receive failed {errors} times: {e}"));
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }
        Ok(got)
    }

    async fn ack(&self, c: &SimpleConsumer, m: &Received) -> Outcome {
        match tokio::time::timeout(REQUEST_TIMEOUT * 2, c.ack(&m.view)).await {
            Ok(Ok(())) => {
                self.log(format!("acked message_id={}", m.view.message_id()));
                Ok(())
            }
            Ok(Err(e)) => Err(describe("SimpleConsumer::ack", &e)),
            Err(_) => Err("ack did not return in time".to_owned()),
        }
    }
}

struct Received {
    at: Instant,
    wall: SystemTime,
    view: MessageView,
}

fn describe(what: &str, e: &ClientError) -> String {
    match e.source() {
        Some(src) => format!("{what} failed: {e}; caused by: {src:#}"),
        None => format!("{what} failed: {e}"),
    }
}

fn ids(v: &[Received]) -> Vec<String> {
    v.iter().map(|m| m.view.message_id().to_owned()).collect()
}

fn bodies(v: &[Received]) -> Vec<String> {
    v.iter().map(|m| String::from_utf8_lossy(m.view.body()).into_owned()).collect()
}

/// A unique tag for this run's message bodies.
fn run_id() -> String {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    format!("{}-{}", std::process::id(), nanos % 1_000_000_000)
}

#[derive(Clone, Copy, Debug)]
enum Answer {
    Commit,
    Rollback,
    Unknown,
}

impl Answer {
    fn resolution(self) -> TransactionResolution {
        match self {
            Answer::Commit => TransactionResolution::COMMIT,
            Answer::Rollback => TransactionResolution::ROLLBACK,
            Answer::Unknown => TransactionResolution::UNKNOWN,
        }
    }
}

type CheckerCalls = Arc<Mutex<Vec<(String, String, Instant)>>>;

struct Checker {
    answer: Answer,
    calls: CheckerCalls,
}

impl Checker {
    fn new(answer: Answer) -> (Self, CheckerCalls) {
        let calls = CheckerCalls::default();
        (Checker { answer, calls: calls.clone() }, calls)
    }
}

async fn run(ctx: &Ctx) -> Outcome {
    ctx.log(format!("endpoint {} topic {} group {}", ctx.args.endpoint, ctx.args.topic, ctx.args.group));
    match ctx.args.scenario.as_str() {
        "send-normal" => send_normal(ctx).await,
        "send-fifo" => send_fifo(ctx).await,
        "consume-fifo-group" => consume_fifo_group(ctx).await,
        "send-delay" => send_delay(ctx).await,
        "transaction-commit" => transaction_commit(ctx).await,
        "transaction-rollback" => transaction_rollback(ctx).await,
        "transaction-check" => transaction_check(ctx).await,
        "transaction-commit-after-check" => transaction_commit_after_check(ctx).await,
        "receive-ack" => receive_ack(ctx).await,
        "redelivery" => redelivery(ctx).await,
        "tls-unpinned" => tls_unpinned(ctx).await,
        other => Err(format!("unknown scenario {other}")),
    }
}

async fn shutdown(ctx: &Ctx, producer: Option<Producer>, consumer: Option<SimpleConsumer>) -> Outcome {
    if let Some(p) = producer {
        p.shutdown().await.map_err(|e| describe("Producer::shutdown", &e))?;
        ctx.log("producer shut down");
    }
    if let Some(c) = consumer {
        c.shutdown().await.map_err(|e| describe("SimpleConsumer::shutdown", &e))?;
        ctx.log("simple consumer shut down");
    }
    Ok(())
}

/// NORMAL messages with a tag, keys and user properties arrive with all of them intact, under
/// the message id the send returned, on their first delivery attempt.
async fn send_normal(ctx: &Ctx) -> Outcome {
    let consumer = ctx.consumer().await?;
    let producer = ctx.producer().await?;
    let run = run_id();
    let mut sent = Vec::new();
    for i in 0..3 {
        let body = format!("normal-{run}-{i}");
        let props: HashMap<String, String> =
            [("color".to_owned(), ["red", "green", "blue"][i].to_owned()), ("index".to_owned(), i.to_string())].into();
        let message = MessageBuilder::builder()
            .set_topic(ctx.topic())
            .set_body(body.clone().into_bytes())
            .set_tag(format!("Tag{i}"))
            .set_keys(vec![format!("key-{run}-{i}"), format!("second-{i}")])
            .set_properties(props.clone())
            .build()
            .map_err(|e| describe("MessageBuilder::build", &e))?;
        let receipt = producer.send(message).await.map_err(|e| describe("Producer::send", &e))?;
        ctx.log(format!("sent {body} message_id={}", receipt.message_id()));
        ctx.check_that(
            "send receipt message id",
            "a non-empty id",
            format!("{:?}", receipt.message_id()),
            !receipt.message_id().is_empty(),
        )?;
        sent.push((receipt.message_id().to_owned(), body, i, props));
    }
    let (got, err) = ctx.receive_until(&consumer, sent.len(), ARRIVAL_BOUND).await;
    ctx.check(&format!("messages received (last receive error: {err:?})"), sent.len(), got.len())?;
    for (id, body, i, props) in &sent {
        let Some(m) = got.iter().find(|m| m.view.message_id() == id) else {
            return ctx.check("a received message with the sent id", Some(id.clone()), None);
        };
        let v = &m.view;
        ctx.check("topic", ctx.topic(), v.topic())?;
        ctx.check("body", body.as_str(), &*String::from_utf8_lossy(v.body()))?;
        ctx.check("tag", Some(format!("Tag{i}")).as_deref(), v.tag())?;
        let mut keys = v.keys().to_vec();
        keys.sort();
        let mut want = vec![format!("key-{}-{i}", run), format!("second-{i}")];
        want.sort();
        ctx.check("keys", want, keys)?;
        ctx.check("user properties", props, v.properties())?;
        ctx.check("delivery attempt", 1, v.delivery_attempt())?;
        ctx.check("message group", None, v.message_group())?;
        ctx.check_that("born host", "non-empty", format!("{:?}", v.born_host()), !v.born_host().is_empty())?;
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() as i64;
        ctx.check_that(
            "born timestamp",
            "within the last 60 s",
            v.born_timestamp().to_string(),
            (now - 60..=now + 1).contains(&v.born_timestamp()),
        )?;
    }
    for m in &got {
        ctx.ack(&consumer, m).await?;
    }
    shutdown(ctx, Some(producer), Some(consumer)).await
}

/// FIFO messages of two message groups, sent interleaved, arrive with their group and, per
/// group, in the order they were sent.
async fn send_fifo(ctx: &Ctx) -> Outcome {
    let consumer = ctx.consumer().await?;
    let producer = ctx.producer().await?;
    let run = run_id();
    let groups = ["order-A", "order-B"];
    let mut sent: Vec<(String, String)> = Vec::new(); // (group, body)
    for i in 0..4 {
        for g in groups {
            let body = format!("{g}-{i}-{run}");
            let message = MessageBuilder::fifo_message_builder(ctx.topic(), body.clone().into_bytes(), g)
                .set_tag("fifo")
                .build()
                .map_err(|e| describe("MessageBuilder::build", &e))?;
            let receipt = producer.send(message).await.map_err(|e| describe("Producer::send (FIFO)", &e))?;
            ctx.log(format!("sent {body} message_id={}", receipt.message_id()));
            sent.push((g.to_owned(), body));
        }
    }
    let (got, err) = ctx.receive_until(&consumer, sent.len(), ARRIVAL_BOUND).await;
    ctx.check(&format!("messages received (last receive error: {err:?})"), sent.len(), got.len())?;
    for g in groups {
        let want: Vec<String> = sent.iter().filter(|(sg, _)| sg == g).map(|(_, b)| b.clone()).collect();
        let arrived: Vec<String> = got
            .iter()
            .filter(|m| String::from_utf8_lossy(m.view.body()).starts_with(&format!("{g}-")))
            .map(|m| String::from_utf8_lossy(m.view.body()).into_owned())
            .collect();
        ctx.check(&format!("arrival order of message group {g}"), &want, &arrived)?;
        for m in got.iter().filter(|m| String::from_utf8_lossy(m.view.body()).starts_with(&format!("{g}-"))) {
            ctx.check("message group of a received message", Some(g), m.view.message_group())?;
        }
    }
    for m in &got {
        ctx.ack(&consumer, m).await?;
    }
    shutdown(ctx, Some(producer), Some(consumer)).await
}

/// A consumer group with `consumeMessageOrderly=true` (created by the harness) consumes a FIFO
/// topic orderly: while the first message of a message group is received and not acknowledged,
/// the next one of that group is not delivered; after the ack it is.
async fn consume_fifo_group(ctx: &Ctx) -> Outcome {
    let consumer = ctx.consumer().await?;
    let producer = ctx.producer().await?;
    let run = run_id();
    let mut sent = Vec::new();
    for i in 0..2 {
        let body = format!("orderly-{i}-{run}");
        let message = MessageBuilder::fifo_message_builder(ctx.topic(), body.clone().into_bytes(), "one-group")
            .build()
            .map_err(|e| describe("MessageBuilder::build", &e))?;
        let receipt = producer.send(message).await.map_err(|e| describe("Producer::send (FIFO)", &e))?;
        ctx.log(format!("sent {body} message_id={}", receipt.message_id()));
        sent.push(body);
    }
    // Both are stored before the first receive, so a non-orderly pop would hand out both.
    let deadline = Instant::now() + ARRIVAL_BOUND;
    let first = loop {
        match ctx.receive_once(&consumer, 1).await {
            Ok(mut v) if !v.is_empty() => break v.remove(0),
            Ok(_) => {}
            Err(e) => ctx.log(format!("receive failed (retrying): {e}")),
        }
        if Instant::now() > deadline {
            return Err(format!("no message of the FIFO topic arrived within {ARRIVAL_BOUND:?}"));
        }
    };
    let first = Received { at: Instant::now(), wall: SystemTime::now(), view: first };
    ctx.check("first message of the group", sent[0].as_str(), &*String::from_utf8_lossy(first.view.body()))?;
    let during = ctx.receive_for(&consumer, Duration::from_secs(1)).await?;
    ctx.check(
        "messages delivered while the group's first message is unacknowledged (orderly consumption)",
        Vec::<String>::new(),
        bodies(&during),
    )?;
    ctx.ack(&consumer, &first).await?;
    let (after, err) = ctx.receive_until(&consumer, 1, ARRIVAL_BOUND).await;
    ctx.check(&format!("message after the ack (last receive error: {err:?})"), vec![sent[1].clone()], bodies(&after))?;
    for m in &after {
        ctx.ack(&consumer, m).await?;
    }
    shutdown(ctx, Some(producer), Some(consumer)).await
}

/// A message with a delivery timestamp is not received before that time, and is received
/// soon after it, carrying the timestamp.
async fn send_delay(ctx: &Ctx) -> Outcome {
    let consumer = ctx.consumer().await?;
    let producer = ctx.producer().await?;
    let body = format!("delayed-{}", run_id());
    // rocketmq 5.0.0 takes whole seconds: 4 to 5 s from now.
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let deliver_at = now.as_secs() as i64 + 5;
    let message = MessageBuilder::delay_message_builder(ctx.topic(), body.clone().into_bytes(), deliver_at)
        .set_tag("delay")
        .build()
        .map_err(|e| describe("MessageBuilder::build", &e))?;
    let receipt = producer.send(message).await.map_err(|e| describe("Producer::send (delay)", &e))?;
    ctx.log(format!("sent {body} message_id={} deliver_at={deliver_at} (unix s)", receipt.message_id()));
    let (got, err) = ctx.receive_until(&consumer, 1, ARRIVAL_BOUND).await;
    ctx.check(&format!("delayed message received (last receive error: {err:?})"), vec![body], bodies(&got))?;
    let m = &got[0];
    let received_ms = m.wall.duration_since(UNIX_EPOCH).unwrap().as_millis() as i64;
    ctx.check_that(
        "receive time",
        &format!("no earlier than the delivery timestamp {} ms", deliver_at * 1000),
        format!("{received_ms} ms ({:+} ms)", received_ms - deliver_at * 1000),
        received_ms >= deliver_at * 1000,
    )?;
    ctx.check("delivery timestamp of the received message", Some(deliver_at), m.view.delivery_timestamp())?;
    ctx.check("message id", receipt.message_id(), m.view.message_id())?;
    ctx.ack(&consumer, m).await?;
    shutdown(ctx, Some(producer), Some(consumer)).await
}

/// A half message is invisible until committed, then visible.
async fn transaction_commit(ctx: &Ctx) -> Outcome {
    let consumer = ctx.consumer().await?;
    // The producer commits itself; a check-back (if the commit comes late) is answered UNKNOWN.
    let (checker, calls) = Checker::new(Answer::Unknown);
    let producer = ctx.transaction_producer(checker).await?;
    let body = format!("commit-{}", run_id());
    let message = MessageBuilder::transaction_message_builder(ctx.topic(), body.clone().into_bytes())
        .set_tag("tx")
        .build()
        .map_err(|e| describe("MessageBuilder::build", &e))?;
    let tx = producer.send_transaction_message(message).await.map_err(|e| describe("send_transaction_message", &e))?;
    ctx.log(format!("sent half message message_id={} transaction_id={}", tx.message_id(), tx.transaction_id()));
    ctx.check_that(
        "transaction id",
        "non-empty",
        format!("{:?}", tx.transaction_id()),
        !tx.transaction_id().is_empty(),
    )?;
    let message_id = tx.message_id().to_owned();
    // One long poll (about 5.9 s) before the commit: nothing may come. (The harness sets
    // transactionTimeOut to 12 s, so no check-back comes before the commit.)
    let before = ctx.receive_for(&consumer, Duration::from_secs(1)).await?;
    ctx.check("messages visible before the commit", Vec::<String>::new(), ids(&before))?;
    tx.commit().await.map_err(|e| describe("Transaction::commit", &e))?;
    ctx.log("committed");
    let (got, err) = ctx.receive_until(&consumer, 1, ARRIVAL_BOUND).await;
    ctx.check(&format!("committed message received (last receive error: {err:?})"), vec![body], bodies(&got))?;
    ctx.check("message id", message_id.as_str(), got[0].view.message_id())?;
    ctx.log(format!("check-backs meanwhile (answered UNKNOWN): {}", calls.lock().unwrap().len()));
    ctx.ack(&consumer, &got[0]).await?;
    shutdown(ctx, Some(producer), Some(consumer)).await
}

/// A rolled-back half message never becomes visible: a transaction committed after it is
/// received, the rolled-back one is not (not even in one more long poll).
async fn transaction_rollback(ctx: &Ctx) -> Outcome {
    let consumer = ctx.consumer().await?;
    let (checker, calls) = Checker::new(Answer::Rollback);
    let producer = ctx.transaction_producer(checker).await?;
    let run = run_id();
    let rolled = format!("rollback-{run}");
    let message = MessageBuilder::transaction_message_builder(ctx.topic(), rolled.clone().into_bytes())
        .build()
        .map_err(|e| describe("MessageBuilder::build", &e))?;
    let tx = producer.send_transaction_message(message).await.map_err(|e| describe("send_transaction_message", &e))?;
    ctx.log(format!("sent half message {rolled} message_id={}", tx.message_id()));
    tx.rollback().await.map_err(|e| describe("Transaction::rollback", &e))?;
    ctx.log("rolled back");
    let marker = format!("committed-after-rollback-{run}");
    let message = MessageBuilder::transaction_message_builder(ctx.topic(), marker.clone().into_bytes())
        .build()
        .map_err(|e| describe("MessageBuilder::build", &e))?;
    let tx = producer.send_transaction_message(message).await.map_err(|e| describe("send_transaction_message", &e))?;
    tx.commit().await.map_err(|e| describe("Transaction::commit", &e))?;
    ctx.log(format!("sent and committed {marker}"));
    let (mut got, err) = ctx.receive_until(&consumer, 1, ARRIVAL_BOUND).await;
    ctx.check_that(
        "the transaction committed after the rollback arrives",
        &format!("a message {marker:?}"),
        format!("{:?} (last receive error: {err:?})", bodies(&got)),
        bodies(&got).contains(&marker),
    )?;
    got.extend(ctx.receive_for(&consumer, Duration::from_secs(1)).await?);
    let seen_rolled: Vec<String> = bodies(&got).into_iter().filter(|b| *b == rolled).collect();
    ctx.check("rolled-back messages received", Vec::<String>::new(), seen_rolled)?;
    ctx.check("check-backs", 0, calls.lock().unwrap().len())?;
    for m in &got {
        ctx.ack(&consumer, m).await?;
    }
    shutdown(ctx, Some(producer), Some(consumer)).await
}

/// A half message left open is checked back: the producer's checker is called with its
/// transaction and message ids, answers COMMIT, and the message becomes visible.
async fn transaction_check(ctx: &Ctx) -> Outcome {
    let consumer = ctx.consumer().await?;
    let (checker, calls) = Checker::new(Answer::Commit);
    let producer = ctx.transaction_producer(checker).await?;
    let body = format!("checked-{}", run_id());
    let message = MessageBuilder::transaction_message_builder(ctx.topic(), body.clone().into_bytes())
        .build()
        .map_err(|e| describe("MessageBuilder::build", &e))?;
    let tx = producer.send_transaction_message(message).await.map_err(|e| describe("send_transaction_message", &e))?;
    let (message_id, transaction_id) = (tx.message_id().to_owned(), tx.transaction_id().to_owned());
    let sent_at = Instant::now();
    ctx.log(format!("sent half message message_id={message_id} transaction_id={transaction_id}; left open"));
    drop(tx);
    // The broker asks after transactionTimeOut, at its next check (transactionCheckInterval).
    let first_call = first_checker_call(ctx, &calls, sent_at, Duration::from_secs(45)).await?;
    ctx.check("checker's transaction id", transaction_id.as_str(), first_call.0.as_str())?;
    ctx.check("checker's message id", message_id.as_str(), first_call.1.as_str())?;
    let (got, err) = ctx.receive_until(&consumer, 1, ARRIVAL_BOUND).await;
    ctx.check(&format!("message committed by the checker received (last receive error: {err:?})"), vec![body], bodies(&got))?;
    ctx.check("message id", message_id.as_str(), got[0].view.message_id())?;
    ctx.check_that(
        "received after the checker answered",
        "true",
        format!("{}", got[0].at >= first_call.2),
        got[0].at >= first_call.2,
    )?;
    ctx.ack(&consumer, &got[0]).await?;
    shutdown(ctx, Some(producer), Some(consumer)).await
}

/// Waits until the checker was called at least once, at most `bound` after `since`.
async fn first_checker_call(
    ctx: &Ctx,
    calls: &CheckerCalls,
    since: Instant,
    bound: Duration,
) -> Result<(String, String, Instant), String> {
    loop {
        if let Some(c) = calls.lock().unwrap().first().cloned() {
            ctx.log(format!("checker called {:.1} s after the send", c.2.duration_since(since).as_secs_f64()));
            return Ok(c);
        }
        if since.elapsed() > bound {
            ctx.check(&format!("checker calls within {bound:?} of the send"), 1, 0)?;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A producer whose checker answered UNKNOWN (its local transaction still running) commits
/// later itself, and the message becomes visible. Java's proxy keeps one transaction entry
/// per send and one per check (TransactionDataManager, up to transactionDataMaxNum), and the
/// UNKNOWN answer's EndTransaction uses up only one of them.
async fn transaction_commit_after_check(ctx: &Ctx) -> Outcome {
    let consumer = ctx.consumer().await?;
    let (checker, calls) = Checker::new(Answer::Unknown);
    let producer = ctx.transaction_producer(checker).await?;
    let body = format!("commit-after-check-{}", run_id());
    let message = MessageBuilder::transaction_message_builder(ctx.topic(), body.clone().into_bytes())
        .build()
        .map_err(|e| describe("MessageBuilder::build", &e))?;
    let tx = producer.send_transaction_message(message).await.map_err(|e| describe("send_transaction_message", &e))?;
    let (message_id, transaction_id) = (tx.message_id().to_owned(), tx.transaction_id().to_owned());
    let sent_at = Instant::now();
    ctx.log(format!("sent half message message_id={message_id} transaction_id={transaction_id}; left open"));
    let call = first_checker_call(ctx, &calls, sent_at, Duration::from_secs(45)).await?;
    ctx.check("checker's transaction id", transaction_id.as_str(), call.0.as_str())?;
    // The client sends its EndTransaction(UNKNOWN, SOURCE_SERVER_CHECK) right after the checker
    // returns; the commit is to come after it (and before the broker's next check, 1 s later).
    tokio::time::sleep(Duration::from_millis(300)).await;
    tx.commit().await.map_err(|e| describe("Transaction::commit after a check-back answered UNKNOWN", &e))?;
    ctx.log("committed");
    let (got, err) = ctx.receive_until(&consumer, 1, ARRIVAL_BOUND).await;
    ctx.check(&format!("committed message received (last receive error: {err:?})"), vec![body], bodies(&got))?;
    ctx.check("message id", message_id.as_str(), got[0].view.message_id())?;
    ctx.ack(&consumer, &got[0]).await?;
    shutdown(ctx, Some(producer), Some(consumer)).await
}

/// Received messages that are acknowledged do not come back after the invisible duration.
async fn receive_ack(ctx: &Ctx) -> Outcome {
    let consumer = ctx.consumer().await?;
    let producer = ctx.producer().await?;
    let run = run_id();
    let mut sent = Vec::new();
    for i in 0..4 {
        let body = format!("ack-{i}-{run}");
        let message = MessageBuilder::builder()
            .set_topic(ctx.topic())
            .set_body(body.clone().into_bytes())
            .set_tag("ack")
            .build()
            .map_err(|e| describe("MessageBuilder::build", &e))?;
        producer.send(message).await.map_err(|e| describe("Producer::send", &e))?;
        sent.push(body);
    }
    let (got, err) = ctx.receive_until(&consumer, sent.len(), ARRIVAL_BOUND).await;
    let mut got_bodies = bodies(&got);
    got_bodies.sort();
    ctx.check(&format!("bodies received (last receive error: {err:?})"), sent.clone(), got_bodies)?;
    for m in &got {
        ctx.check("delivery attempt", 1, m.view.delivery_attempt())?;
        ctx.ack(&consumer, m).await?;
    }
    let acked_at = Instant::now();
    // Past the invisible duration (10 s) by a few seconds.
    let window = INVISIBLE + Duration::from_secs(3);
    let later = ctx.receive_for(&consumer, window).await?;
    ctx.log(format!("listened {:.1} s after the acks", acked_at.elapsed().as_secs_f64()));
    ctx.check("messages redelivered after they were acknowledged", Vec::<String>::new(), bodies(&later))?;
    shutdown(ctx, Some(producer), Some(consumer)).await
}

/// A received message that is not acknowledged comes back after its invisible duration, as
/// delivery attempt 2 with the same message id; then it is acknowledged and stays away.
async fn redelivery(ctx: &Ctx) -> Outcome {
    let consumer = ctx.consumer().await?;
    let producer = ctx.producer().await?;
    let body = format!("redeliver-{}", run_id());
    let message = MessageBuilder::builder()
        .set_topic(ctx.topic())
        .set_body(body.clone().into_bytes())
        .set_tag("again")
        .set_keys(vec!["again-key"])
        .build()
        .map_err(|e| describe("MessageBuilder::build", &e))?;
    let receipt = producer.send(message).await.map_err(|e| describe("Producer::send", &e))?;
    let (first, err) = ctx.receive_until(&consumer, 1, ARRIVAL_BOUND).await;
    ctx.check(&format!("first delivery (last receive error: {err:?})"), vec![body.clone()], bodies(&first))?;
    ctx.check("first delivery attempt", 1, first[0].view.delivery_attempt())?;
    let first_at = first[0].at;
    ctx.log(format!("not acknowledging; invisible for {INVISIBLE:?}"));
    let (again, err) = ctx.receive_until(&consumer, 1, INVISIBLE + ARRIVAL_BOUND).await;
    ctx.check(&format!("redelivered bodies (last receive error: {err:?})"), vec![body], bodies(&again))?;
    let m = &again[0];
    let after = m.at.duration_since(first_at);
    ctx.check_that(
        "time until redelivery",
        &format!("at least the invisible duration {INVISIBLE:?} (less 500 ms of timer slack)"),
        format!("{after:?}"),
        after + Duration::from_millis(500) >= INVISIBLE,
    )?;
    ctx.check("redelivery attempt", 2, m.view.delivery_attempt())?;
    ctx.check("redelivered message id", receipt.message_id(), m.view.message_id())?;
    ctx.check("redelivered keys", vec!["again-key".to_owned()], m.view.keys().to_vec())?;
    ctx.check("redelivered tag", Some("again"), m.view.tag())?;
    ctx.ack(&consumer, m).await?;
    shutdown(ctx, Some(producer), Some(consumer)).await
}

/// Without the certificate pinned, `set_enable_tls(true)` cannot talk to a server with a
/// self-signed certificate: rocketmq 5.0.0 checks it against the system roots and has no
/// option to trust it. This asserts that behaviour of the client (the reason for pinning).
async fn tls_unpinned(ctx: &Ctx) -> Outcome {
    if !ctx.args.tls {
        return Err("tls-unpinned only makes sense with --tls on".to_owned());
    }
    let mut option = ProducerOption::default();
    option.set_topics(vec![ctx.topic()]);
    let mut p = Producer::new(option, ctx.client_option()).map_err(|e| describe("Producer::new", &e))?;
    match tokio::time::timeout(Duration::from_secs(20), p.start()).await {
        Err(_) => Err("Producer::start neither succeeded nor failed within 20 s".to_owned()),
        Ok(Ok(())) => ctx.check_that(
            "Producer::start with an untrusted self-signed certificate",
            "a certificate error",
            "success (is the certificate trusted by the system roots?)".to_owned(),
            false,
        ),
        Ok(Err(e)) => {
            let text = describe("Producer::start", &e);
            ctx.check_that(
                "Producer::start with an untrusted self-signed certificate",
                "an error naming the certificate",
                text.clone(),
                text.to_ascii_lowercase().contains("certificate"),
            )
        }
    }
}

/// Reads the server's certificate in a TLS handshake that trusts anything (as RocketMQ's Java
/// client does), writes it as PEM to a file of this process and points `SSL_CERT_FILE` at it.
async fn pin_server_certificate(endpoint: &str) -> Result<String, String> {
    use tokio_rustls::rustls;

    struct TrustAnything;
    impl rustls::client::ServerCertVerifier for TrustAnything {
        fn verify_server_cert(
            &self,
            _end_entity: &rustls::Certificate,
            _intermediates: &[rustls::Certificate],
            _server_name: &rustls::ServerName,
            _scts: &mut dyn Iterator<Item = &[u8]>,
            _ocsp_response: &[u8],
            _now: SystemTime,
        ) -> Result<rustls::client::ServerCertVerified, rustls::Error> {
            Ok(rustls::client::ServerCertVerified::assertion())
        }
    }

    let mut config = rustls::ClientConfig::builder()
        .with_safe_defaults()
        .with_custom_certificate_verifier(Arc::new(TrustAnything))
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let host = endpoint.rsplit_once(':').map_or(endpoint, |(h, _)| h);
    let name = rustls::ServerName::try_from(host).map_err(|e| format!("server name {host:?}: {e}"))?;
    let connect = async {
        let tcp = tokio::net::TcpStream::connect(endpoint).await.map_err(|e| format!("connect {endpoint}: {e}"))?;
        tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(name, tcp)
            .await
            .map_err(|e| format!("TLS handshake with {endpoint}: {e}"))
    };
    let tls = tokio::time::timeout(Duration::from_secs(10), connect)
        .await
        .map_err(|_| format!("TLS handshake with {endpoint} timed out"))??;
    let (_, session) = tls.get_ref();
    let cert = session
        .peer_certificates()
        .and_then(|c| c.first())
        .ok_or_else(|| "the server presented no certificate".to_owned())?;
    let path = std::env::temp_dir().join(format!("rust5-compat-{}.pem", std::process::id()));
    let mut pem = String::from("-----BEGIN CERTIFICATE-----\n");
    let encoded = base64(&cert.0);
    for line in encoded.as_bytes().chunks(64) {
        pem.push_str(std::str::from_utf8(line).unwrap());
        pem.push('\n');
    }
    pem.push_str("-----END CERTIFICATE-----\n");
    std::fs::write(&path, pem).map_err(|e| format!("write {}: {e}", path.display()))?;
    std::env::set_var("SSL_CERT_FILE", &path);
    Ok(path.display().to_string())
}

fn base64(data: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> shift) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}
