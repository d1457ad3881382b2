//! The broker's metrics under RocketMQ 5.x's names (observability.md §1.2, §1.3), served on
//! `/metrics` when `metricsExporterType=PROM`.
//!
//! Traffic is counted on the hot path in [`BrokerMetrics`] (one read-locked map look-up and a
//! few relaxed atomic adds per send batch or pull); everything that describes state (lag,
//! connections, topics, disk) is read by [`BrokerCollector`] when Prometheus scrapes.
//!
//! Where FerroMQ differs from Java's figures:
//! * a pull group's `inflight` is 0 and `ready` equals its lag: the broker does not keep the
//!   offset of each group's last pull apart from its committed offset (POP groups are exact);
//! * `rocketmq_rpc_latency`'s `is_long_polling` is true for requests the broker held and
//!   answered later, as Java's `isSuspended`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Weak};

use ferromq_metrics::counters::Row;
use ferromq_metrics::families::{
    emit, emit_folded, emit_histogram, emit_one, Family, Folded, HistogramSeries, Kind, Series,
};
use ferromq_metrics::prometheus_client::collector::Collector;
use ferromq_metrics::prometheus_client::encoding::DescriptorEncoder;
use ferromq_metrics::CounterTable;
use ferromq_protocol::body::ConsumeType;
use ferromq_protocol::message::{keys, sysflag, MessageProperties};
use ferromq_protocol::topic_validator::is_system_topic;
use ferromq_protocol::version;

use crate::broker::Broker;
use crate::metadata::is_sys_consumer_group;
use crate::stats::{clock_ms, BrokerStats};

/// Java's `message_type` label values, in the column order of [`BrokerMetrics::stored`].
pub(crate) const MESSAGE_TYPES: [&str; 4] = ["normal", "fifo", "delay", "transaction"];

/// A message's `message_type` (Java: `BrokerMetricsManager#getMessageType`): a prepared
/// transaction, else FIFO when it has a sharding key (message group), else delay when it
/// asks for a delivery time or level, else normal.
pub(crate) fn message_type(sys_flag: i32, properties: &MessageProperties) -> usize {
    if sysflag::transaction_value(sys_flag) == sysflag::TRANSACTION_PREPARED_TYPE
        || properties.get(keys::TRAN_MSG) == Some("true")
    {
        3
    } else if properties.get(keys::SHARDING_KEY).is_some() {
        1
    } else if keys::asks_for_delay(properties) {
        2
    } else {
        0
    }
}

/// The broker's traffic counters.
#[derive(Debug)]
pub(crate) struct BrokerMetrics {
    /// By topic, what was stored: messages and bytes of each message type (normal, fifo,
    /// delay, transaction; columns `2 * type ..`), then for each type the body sizes per
    /// [`MESSAGE_SIZE_BOUNDS`] bucket (and above) and their sum (columns `SIZES + 8 * type ..`).
    /// One table, so a send looks its topic up once for both families.
    stored: CounterTable<{ SIZES + 32 }>,
    /// By `topic@group`: messages and bytes delivered by pulls and pops.
    messages_out: CounterTable<2>,
    /// By `topic@group` (the original topic): messages moved to the group's DLQ.
    send_to_dlq: CounterTable<1>,
    /// By topic: transaction commits and rollbacks.
    transactions: CounterTable<2>,
    /// Prepare-to-end seconds of transactions by topic, per [`FINISH_BOUNDS_S`] bucket, then
    /// the sum.
    finish_latency: CounterTable<8>,
    /// Milliseconds UPDATE_AND_CREATE_TOPIC(_LIST) took (registration included) and
    /// UPDATE_AND_CREATE_SUBSCRIPTIONGROUP took, per [`CREATE_BOUNDS_MS`] bucket, then the sum
    /// (keys `topic` and `group`).
    create_time: CounterTable<7>,
    /// The most label sets one family shows (`metricsOtelCardinalityLimit`).
    pub(crate) limit: usize,
}

/// Where the body-size columns of [`BrokerMetrics::stored`] start.
const SIZES: usize = 2 * MESSAGE_TYPES.len();

/// Java's buckets of `rocketmq_message_size` (bytes).
pub(crate) const MESSAGE_SIZE_BOUNDS: [f64; 6] = [1024.0, 4096.0, 524_288.0, 1_048_576.0, 2_097_152.0, 4_194_304.0];
/// Java's buckets of `rocketmq_finish_message_latency` (seconds).
pub(crate) const FINISH_BOUNDS_S: [f64; 6] = [5.0, 60.0, 600.0, 3600.0, 43_200.0, 86_400.0];
/// Java's buckets of the topic and group creation times (ms).
pub(crate) const CREATE_BOUNDS_MS: [f64; 5] = [10.0, 100.0, 1000.0, 3000.0, 5000.0];

/// The bucket of `value` among `bounds` (`bounds.len()` when above them all).
fn bucket(bounds: &[f64], value: f64) -> usize {
    bounds.iter().position(|b| value <= *b).unwrap_or(bounds.len())
}

impl BrokerMetrics {
    pub(crate) fn new(limit: usize) -> Self {
        // Rows are bounded as the families: what a client inventing names adds past it is
        // counted under `_other`.
        let rows = limit.max(1);
        BrokerMetrics {
            stored: CounterTable::new(rows),
            messages_out: CounterTable::new(rows),
            send_to_dlq: CounterTable::new(rows),
            transactions: CounterTable::new(rows),
            finish_latency: CounterTable::new(rows),
            create_time: CounterTable::new(2),
            limit,
        }
    }

    /// Messages of type `kind` ([`message_type`]) stored in `topic`, with these body sizes.
    pub(crate) fn messages_stored(&self, topic: &str, kind: usize, sizes: impl Iterator<Item = usize>) {
        let mut counts = [0u64; 7];
        let (mut messages, mut bytes) = (0, 0);
        for size in sizes {
            counts[bucket(&MESSAGE_SIZE_BOUNDS, size as f64)] += 1;
            messages += 1;
            bytes += size as u64;
        }
        // On the stack: this runs for every send.
        let mut adds = [(0usize, 0u64); 10];
        adds[0] = (2 * kind, messages);
        adds[1] = (2 * kind + 1, bytes);
        let mut used = 2;
        for (i, n) in counts.iter().enumerate().filter(|(_, n)| **n > 0) {
            adds[used] = (SIZES + 8 * kind + i, *n);
            used += 1;
        }
        adds[used] = (SIZES + 8 * kind + 7, bytes);
        self.stored.add(topic, &adds[..=used]);
    }

    /// A transaction of `topic` ended `seconds` after its half message was stored.
    pub(crate) fn transaction_finished(&self, topic: &str, seconds: u64) {
        self.finish_latency.add(topic, &[(bucket(&FINISH_BOUNDS_S, seconds as f64), 1), (7, seconds)]);
    }

    /// A topic update took `took`.
    pub(crate) fn topic_created(&self, took: std::time::Duration) {
        self.created("topic", took);
    }

    /// A subscription group update took `took`.
    pub(crate) fn group_created(&self, took: std::time::Duration) {
        self.created("group", took);
    }

    fn created(&self, key: &str, took: std::time::Duration) {
        let ms = took.as_millis() as u64;
        self.create_time.add(key, &[(bucket(&CREATE_BOUNDS_MS, ms as f64), 1), (6, ms)]);
    }

    /// `count` messages of `bytes` delivered to a group from a topic, keyed by their
    /// [`BrokerStats::group_key`] (the one the stats counted them under).
    pub(crate) fn message_out(&self, group_key: &str, count: u64, bytes: u64) {
        self.messages_out.add(group_key, &[(0, count), (1, bytes)]);
    }

    /// `count` messages of `group` from `topic` moved to the group's DLQ.
    pub(crate) fn dead_lettered(&self, topic: &str, group: &str, count: u64) {
        self.send_to_dlq.add(&BrokerStats::group_key(topic, group), &[(0, count)]);
    }

    /// A transaction of `topic` committed (`true`) or rolled back.
    pub(crate) fn transaction_ended(&self, topic: &str, committed: bool) {
        self.transactions.add(topic, &[(usize::from(!committed), 1)]);
    }

    /// Forgets a deleted topic's rows.
    pub(crate) fn on_topic_deleted(&self, topic: &str) {
        self.stored.remove_where(|k| k == topic);
        self.transactions.remove_where(|k| k == topic);
        self.finish_latency.remove_where(|k| k == topic);
        self.messages_out.remove_where(|k| BrokerStats::split_group_key(k).0 == topic);
        self.send_to_dlq.remove_where(|k| BrokerStats::split_group_key(k).0 == topic);
    }
}

fn flag(b: bool) -> String {
    if b { "true" } else { "false" }.to_owned()
}

fn is_retry(topic: &str) -> bool {
    topic.starts_with(crate::metadata::RETRY_GROUP_TOPIC_PREFIX)
}

/// The overflow row of a counter table as the series' `_other` row.
fn with_overflow<const N: usize>(
    (mut rows, overflow): (Vec<Row<N>>, Option<[u64; N]>),
    other_key: &str,
) -> Vec<Row<N>> {
    if let Some(values) = overflow {
        rows.push((other_key.to_owned(), values));
    }
    rows
}

/// The lag figures of one (group, topic) (observability.md §1.3).
#[derive(Debug, Default, Clone, Copy)]
struct Lag {
    lag: i64,
    inflight: i64,
    ready: i64,
    /// Store time of the oldest message not consumed, if any.
    oldest_unconsumed_ms: Option<i64>,
    /// Store time of the oldest message not delivered, if any.
    oldest_undelivered_ms: Option<i64>,
}

/// Reads the broker's state into the families on each scrape.
#[derive(Debug)]
pub(crate) struct BrokerCollector {
    pub(crate) broker: Weak<Broker>,
}

impl BrokerCollector {
    fn lags(broker: &Broker) -> BTreeMap<(String, String), Lag> {
        // Every (group, topic) with committed offsets, and every topic an online group
        // subscribes to.
        let mut pairs: BTreeSet<(String, String)> = broker
            .offsets()
            .snapshot()
            .offset_table
            .into_keys()
            .filter_map(|k| k.split_once('@').map(|(t, g)| (g.to_owned(), t.to_owned())))
            .collect();
        for group in broker.consumers.groups() {
            if let Some(info) = broker.consumers.group(&group) {
                pairs.extend(info.subscriptions.keys().map(|t| (group.clone(), t.clone())));
            }
        }
        let mut lags = BTreeMap::new();
        for (group, topic) in pairs {
            let Some(config) = broker.topics().select(&topic) else { continue };
            let mut lag = Lag::default();
            for (mq, p) in broker.queue_progress(&group, &topic, config.read_queue_nums) {
                lag.lag += (p.broker_offset - p.consumer_offset).max(0);
                lag.inflight += (p.pull_offset - p.consumer_offset).max(0);
                lag.ready += (p.broker_offset - p.pull_offset).max(0);
                let store_time = |offset: i64| {
                    (offset < p.broker_offset)
                        .then(|| broker.store.message_store_time(&topic, mq.queue_id, offset))
                        .flatten()
                        .filter(|t| *t > 0)
                };
                let oldest = |known: Option<i64>, t: Option<i64>| match (known, t) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                lag.oldest_unconsumed_ms = oldest(lag.oldest_unconsumed_ms, store_time(p.consumer_offset));
                lag.oldest_undelivered_ms = oldest(lag.oldest_undelivered_ms, store_time(p.pull_offset));
            }
            lags.insert((group, topic), lag);
        }
        lags
    }
}

impl BrokerCollector {
    /// The histograms, the processor watermarks and the POP buffer.
    fn encode_histograms(
        &self,
        b: &Broker,
        encoder: &mut DescriptorEncoder<'_>,
        folded: &mut Folded,
    ) -> Result<(), std::fmt::Error> {
        let limit = b.metrics.limit;
        let histogram = |name, help, unit| Family { name, help, unit, kind: Kind::Gauge };
        let gauge = histogram;
        let rows = with_overflow(b.metrics.finish_latency.snapshot(), ferromq_metrics::families::FOLDED);
        let finish = rows
            .iter()
            .map(|(t, v)| HistogramSeries {
                labels: vec![("topic", t.clone())],
                counts: v[..7].to_vec(),
                sum: v[7] as f64,
            })
            .collect();
        emit_histogram(
            encoder,
            histogram(
                "rocketmq_finish_message_latency",
                "Seconds from a half message's store to its transaction's end",
                None,
            ),
            &FINISH_BOUNDS_S,
            finish,
            limit,
            folded,
        )?;
        let rows = with_overflow(b.metrics.stored.snapshot(), ferromq_metrics::families::FOLDED);
        let mut sizes = Vec::new();
        for (topic, v) in &rows {
            for (kind, name) in MESSAGE_TYPES.iter().enumerate() {
                let counts = v[SIZES + 8 * kind..SIZES + 8 * kind + 7].to_vec();
                if counts.iter().all(|c| *c == 0) {
                    continue;
                }
                sizes.push(HistogramSeries {
                    labels: vec![("topic", topic.clone()), ("message_type", (*name).to_owned())],
                    counts,
                    sum: v[SIZES + 8 * kind + 7] as f64,
                });
            }
        }
        emit_histogram(
            encoder,
            histogram("rocketmq_message_size", "Body sizes of the messages stored (bytes)", None),
            &MESSAGE_SIZE_BOUNDS,
            sizes,
            limit,
            folded,
        )?;
        let created = b.metrics.create_time.snapshot().0;
        for (key, name, help) in [
            (
                "topic",
                "rocketmq_topic_create_execution_time",
                "Time an UPDATE_AND_CREATE_TOPIC took, registration included",
            ),
            (
                "group",
                "rocketmq_consumer_group_create_execution_time",
                "Time an UPDATE_AND_CREATE_SUBSCRIPTIONGROUP took",
            ),
        ] {
            let row = created.iter().find(|(k, _)| k == key).map_or([0; 7], |(_, v)| *v);
            let series = vec![HistogramSeries { labels: Vec::new(), counts: row[..6].to_vec(), sum: row[6] as f64 }];
            emit_histogram(encoder, histogram(name, help, Some("milliseconds")), &CREATE_BOUNDS_MS, series, 1, folded)?;
        }
        // Requests waiting: sends being stored, pulls and pops parked (FerroMQ has no executor
        // queues; these stand in for them).
        let watermarks = vec![
            Series::new(
                vec![("processor", "send".to_owned())],
                b.config.send_thread_pool_queue_capacity.saturating_sub(b.send_permits.available_permits()),
            ),
            Series::new(vec![("processor", "pull".to_owned())], b.pull_hold.len() + b.pop.hold.len()),
        ];
        emit(
            encoder,
            gauge("rocketmq_processor_watermark", "Requests waiting, by processor", None),
            watermarks,
            limit,
            folded,
        )?;
        if let Some(buffer) = &b.pop.buffer {
            emit_one(
                encoder,
                gauge(
                    "rocketmq_pop_checkpoint_buffer_size",
                    "POP checkpoints held in memory (enablePopBufferMerge)",
                    None,
                ),
                buffer.len(),
            )?;
        }
        Ok(())
    }
}

impl Collector for BrokerCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let Some(b) = self.broker.upgrade() else { return Ok(()) };
        let limit = b.metrics.limit;
        let mut folded = Folded::default();
        let gauge = |name, help, unit| Family { name, help, unit, kind: Kind::Gauge };
        let counter = |name, help| Family { name, help, unit: None, kind: Kind::Counter };

        emit_one(
            &mut encoder,
            gauge("rocketmq_broker_permission", "brokerPermission (6: read and write)", None),
            b.permission(),
        )?;
        emit_one(&mut encoder, gauge("rocketmq_topic_number", "Topic configs of the broker", None), b.topics().len())?;
        let groups = b.groups().all().subscription_group_table;
        emit_one(
            &mut encoder,
            gauge("rocketmq_consumer_group_number", "Subscription groups of the broker", None),
            groups.len(),
        )?;

        // Traffic in.
        let rows = with_overflow(b.metrics.stored.snapshot(), ferromq_metrics::families::FOLDED);
        let (mut msgs, mut bytes) = (Vec::new(), Vec::new());
        for (topic, values) in &rows {
            for (kind, name) in MESSAGE_TYPES.iter().enumerate() {
                if values[2 * kind] == 0 && values[2 * kind + 1] == 0 {
                    continue;
                }
                let labels = vec![
                    ("topic", topic.clone()),
                    ("message_type", (*name).to_owned()),
                    ("is_system", flag(is_system_topic(topic))),
                ];
                msgs.push(Series::new(labels.clone(), values[2 * kind]));
                bytes.push(Series::new(labels, values[2 * kind + 1]));
            }
        }
        emit(&mut encoder, counter("rocketmq_messages_in", "Messages stored"), msgs, limit, &mut folded)?;
        emit(
            &mut encoder,
            counter("rocketmq_throughput_in", "Bytes of the message bodies stored"),
            bytes,
            limit,
            &mut folded,
        )?;

        // Traffic out.
        let rows = with_overflow(b.metrics.messages_out.snapshot(), "_other@_other");
        let (mut msgs, mut bytes) = (Vec::new(), Vec::new());
        for (key, values) in &rows {
            let (topic, group) = BrokerStats::split_group_key(key);
            let labels = vec![
                ("topic", topic.to_owned()),
                ("consumer_group", group.to_owned()),
                ("is_retry", flag(is_retry(topic))),
                ("is_system", flag(is_system_topic(topic) || is_sys_consumer_group(group))),
            ];
            msgs.push(Series::new(labels.clone(), values[0]));
            bytes.push(Series::new(labels, values[1]));
        }
        emit(
            &mut encoder,
            counter("rocketmq_messages_out", "Messages delivered by pulls and pops"),
            msgs,
            limit,
            &mut folded,
        )?;
        emit(
            &mut encoder,
            counter("rocketmq_throughput_out", "Bytes of the messages delivered"),
            bytes,
            limit,
            &mut folded,
        )?;

        let rows = with_overflow(b.metrics.send_to_dlq.snapshot(), "_other@_other");
        let dlq = rows
            .iter()
            .map(|(key, values)| {
                let (topic, group) = BrokerStats::split_group_key(key);
                let labels = vec![
                    ("consumer_group", group.to_owned()),
                    ("topic", topic.to_owned()),
                    ("is_system", flag(is_system_topic(topic) || is_sys_consumer_group(group))),
                ];
                Series::new(labels, values[0])
            })
            .collect();
        emit(
            &mut encoder,
            counter("rocketmq_send_to_dlq_messages", "Messages moved to a dead-letter queue"),
            dlq,
            limit,
            &mut folded,
        )?;

        let rows = with_overflow(b.metrics.transactions.snapshot(), ferromq_metrics::families::FOLDED);
        let commits = rows.iter().map(|(t, v)| Series::new(vec![("topic", t.clone())], v[0])).collect();
        let rollbacks = rows.iter().map(|(t, v)| Series::new(vec![("topic", t.clone())], v[1])).collect();
        emit(&mut encoder, counter("rocketmq_commit_messages", "Transactions committed"), commits, limit, &mut folded)?;
        emit(
            &mut encoder,
            counter("rocketmq_rollback_messages", "Transactions rolled back"),
            rollbacks,
            limit,
            &mut folded,
        )?;
        self.encode_histograms(&b, &mut encoder, &mut folded)?;

        // Connections.
        let mut producers: BTreeMap<(String, String), u64> = BTreeMap::new();
        for info in b.producers.table().into_values().flatten() {
            let key = (info.language.name().to_ascii_lowercase(), version::name(info.version).to_ascii_lowercase());
            *producers.entry(key).or_default() += 1;
        }
        let series = producers
            .into_iter()
            .map(|((language, version), n)| {
                Series::new(vec![("language", language), ("version", version), ("protocol_type", "remoting".into())], n)
            })
            .collect();
        emit(
            &mut encoder,
            gauge("rocketmq_producer_connections", "Producer connections", None),
            series,
            limit,
            &mut folded,
        )?;
        let mut consumers: BTreeMap<(String, String, String, &'static str), u64> = BTreeMap::new();
        for group in b.consumers.groups() {
            let Some(info) = b.consumers.group(&group) else { continue };
            let mode = match info.consume_type {
                ConsumeType::ConsumeActively => "pull",
                ConsumeType::ConsumePassively => "push",
                ConsumeType::ConsumePop => "pop",
            };
            for channel in info.channels.values() {
                let key = (
                    group.clone(),
                    channel.language.name().to_ascii_lowercase(),
                    version::name(channel.version).to_ascii_lowercase(),
                    mode,
                );
                *consumers.entry(key).or_default() += 1;
            }
        }
        let series = consumers
            .into_iter()
            .map(|((group, language, version, mode), n)| {
                let system = flag(is_sys_consumer_group(&group));
                Series::new(
                    vec![
                        ("consumer_group", group),
                        ("language", language),
                        ("version", version),
                        ("consume_mode", mode.to_owned()),
                        ("protocol_type", "remoting".into()),
                        ("is_system", system),
                    ],
                    n,
                )
            })
            .collect();
        emit(
            &mut encoder,
            gauge("rocketmq_consumer_connections", "Consumer connections", None),
            series,
            limit,
            &mut folded,
        )?;

        // Lag.
        let now = i64::try_from(clock_ms()).unwrap_or(i64::MAX);
        let lags = Self::lags(&b);
        let labels = |group: &str, topic: &str| {
            vec![
                ("consumer_group", group.to_owned()),
                ("topic", topic.to_owned()),
                ("is_retry", flag(is_retry(topic))),
                ("is_system", flag(is_system_topic(topic) || is_sys_consumer_group(group))),
            ]
        };
        let family = |pick: &dyn Fn(&Lag) -> i64| -> Vec<Series> {
            lags.iter().map(|((g, t), lag)| Series::new(labels(g, t), pick(lag))).collect()
        };
        let age = |t: Option<i64>| t.map_or(0, |t| (now - t).max(0));
        emit(
            &mut encoder,
            gauge("rocketmq_consumer_lag_messages", "Messages not consumed yet", None),
            family(&|l| l.lag),
            limit,
            &mut folded,
        )?;
        emit(
            &mut encoder,
            gauge("rocketmq_consumer_lag_latency", "Age of the oldest message not consumed yet", Some("milliseconds")),
            family(&|l| age(l.oldest_unconsumed_ms)),
            limit,
            &mut folded,
        )?;
        emit(
            &mut encoder,
            gauge("rocketmq_consumer_inflight_messages", "Messages delivered and not acknowledged yet", None),
            family(&|l| l.inflight),
            limit,
            &mut folded,
        )?;
        emit(
            &mut encoder,
            gauge("rocketmq_consumer_ready_messages", "Messages not delivered yet", None),
            family(&|l| l.ready),
            limit,
            &mut folded,
        )?;
        emit(
            &mut encoder,
            gauge(
                "rocketmq_consumer_queueing_latency",
                "Age of the oldest message not delivered yet",
                Some("milliseconds"),
            ),
            family(&|l| age(l.oldest_undelivered_ms)),
            limit,
            &mut folded,
        )?;

        // Store.
        let store_config = b.store.config();
        let space = ferromq_store::disk_space(&store_config.commit_log_dir());
        let used = space.map_or(0, |s| s.total_bytes().saturating_sub(s.free_bytes()));
        emit_one(
            &mut encoder,
            gauge("rocketmq_storage_size", "Used bytes of the disk holding the CommitLog", Some("bytes")),
            used,
        )?;
        let unflushed = (b.store.max_phy_offset() - b.store.flushed_phy_offset()).max(0);
        emit_one(
            &mut encoder,
            gauge("rocketmq_storage_flush_behind", "CommitLog bytes not flushed yet", Some("bytes")),
            unflushed,
        )?;
        emit_one(
            &mut encoder,
            gauge(
                "rocketmq_storage_dispatch_behind",
                "CommitLog bytes not dispatched to consume queues yet",
                Some("bytes"),
            ),
            b.store.dispatch_behind_bytes(),
        )?;
        let reserve = b.store.earliest_message_time_in_log().filter(|t| *t > 0).map_or(0, |t| (now - t).max(0));
        emit_one(
            &mut encoder,
            gauge("rocketmq_storage_message_reserve_time", "Age of the oldest message kept", Some("milliseconds")),
            reserve,
        )?;
        emit_one(
            &mut encoder,
            gauge("ferromq_storage_disk_ratio", "Used share of the disk holding the CommitLog (0 to 1)", None),
            space.and_then(|s| s.used_percent()).map_or(-1.0, |p| p / 100.0),
        )?;
        emit_one(
            &mut encoder,
            gauge("ferromq_storage_commitlog_max_offset", "The CommitLog's end offset", Some("bytes")),
            b.store.max_phy_offset(),
        )?;
        emit_one(
            &mut encoder,
            gauge("ferromq_storage_disk_full", "1 while the disk guard refuses writes", None),
            u8::from(b.store.disk_guard().is_full()),
        )?;
        if let Some(timer) = b.timer() {
            emit_one(
                &mut encoder,
                gauge("rocketmq_timer_enqueue_lag", "Timer messages waiting to enter the wheel", None),
                timer.enqueue_behind_messages(),
            )?;
            emit_one(
                &mut encoder,
                gauge("rocketmq_timer_dequeue_latency", "How far the wheel's delivery is behind", Some("milliseconds")),
                timer.dequeue_behind_ms(),
            )?;
            // Per topic, as Java's TimerMetrics counts them (since this broker started).
            let counts = timer.topic_counts();
            let timing = counts.iter().map(|(t, c)| Series::new(vec![("topic", t.clone())], c.timing())).collect();
            let help = "Messages waiting in the timer wheel";
            emit(&mut encoder, gauge("rocketmq_timing_messages", help, None), timing, limit, &mut folded)?;
            let enqueued = counts.iter().map(|(t, c)| Series::new(vec![("topic", t.clone())], c.enqueued)).collect();
            let help = "Messages linked into the timer wheel (a roll counts again)";
            emit(&mut encoder, counter("rocketmq_timer_enqueue", help), enqueued, limit, &mut folded)?;
            let dequeued = counts.iter().map(|(t, c)| Series::new(vec![("topic", t.clone())], c.dequeued)).collect();
            let help = "Messages taken out of the timer wheel when due";
            emit(&mut encoder, counter("rocketmq_timer_dequeue", help), dequeued, limit, &mut folded)?;
            let latency = timer.delay_latency();
            let series =
                vec![HistogramSeries { labels: Vec::new(), counts: latency.buckets.to_vec(), sum: latency.sum_s }];
            let family = Family {
                name: "rocketmq_delay_message_latency",
                help: "Seconds a due timer message was delivered after its time",
                unit: Some("seconds"),
                kind: Kind::Gauge,
            };
            emit_histogram(
                &mut encoder,
                family,
                &ferromq_timer::topic_metrics::LATENCY_BOUNDS_S,
                series,
                1,
                &mut folded,
            )?;
        }
        b.half_messages.encode(&mut encoder, limit, &mut folded)?;
        b.pop.metrics.encode(&mut encoder, limit, &mut folded)?;
        // Replication and role.
        let role = b.role();
        let role_value = match role.broker_role {
            _ if role.fenced => 0,
            crate::BrokerRole::AsyncMaster | crate::BrokerRole::SyncMaster => 1,
            crate::BrokerRole::Slave => 2,
        };
        emit_one(
            &mut encoder,
            gauge("ferromq_broker_role", "0 fenced (controller mode, no role yet), 1 master, 2 slave", None),
            role_value,
        )?;
        let info = match b.replication() {
            crate::ha::Replication::Master(ha) => Some(ha.runtime_info()),
            crate::ha::Replication::AutoSwitchMaster(ha) => Some(ha.runtime_info()),
            crate::ha::Replication::Slave(c) => Some(c.runtime_info()),
            crate::ha::Replication::AutoSwitchSlave(c) => Some(c.runtime_info()),
            crate::ha::Replication::None => None,
        };
        if let Some(info) = info {
            let lag = info
                .ha_connection_info
                .iter()
                .map(|c| Series::new(vec![("slave_addr", c.addr.clone())], c.diff.max(0)))
                .collect();
            emit(
                &mut encoder,
                gauge(
                    "ferromq_replication_slave_behind",
                    "CommitLog bytes a connected slave is behind (master)",
                    Some("bytes"),
                ),
                lag,
                limit,
                &mut folded,
            )?;
            if info.master {
                emit_one(
                    &mut encoder,
                    gauge("ferromq_replication_in_sync_slaves", "Connected slaves within haMaxGapNotInSync", None),
                    info.in_sync_slave_nums,
                )?;
            } else {
                let read = info.ha_client_runtime_info.last_read_timestamp;
                emit_one(
                    &mut encoder,
                    gauge(
                        "ferromq_replication_master_silence",
                        "Time since the slave last read from its master",
                        Some("milliseconds"),
                    ),
                    if read > 0 { (now - read).max(0) } else { -1 },
                )?;
            }
        }
        emit_folded(&mut encoder, &folded)
    }
}

/// Starts the broker's `/metrics` when `metricsExporterType=PROM`: registers the RPC latency
/// observer in `server_config`, and returns the bound listener and the registry to serve.
///
/// # Errors
/// A malformed `metricsLabel`, or the port cannot be bound (named with the keys to change).
pub(crate) async fn exporter(
    settings: &crate::BrokerSettings,
    broker: &Arc<Broker>,
    server_config: &mut ferromq_remoting::ServerConfig,
) -> Result<Option<(tokio::net::TcpListener, ferromq_metrics::Metrics)>, String> {
    let node = ferromq_metrics::registry::Node {
        cluster: settings.broker.broker_cluster_name.clone(),
        node_type: "broker",
        node_id: settings.broker.broker_name.clone(),
        extra: Vec::new(),
    };
    let Some(mut prepared) =
        ferromq_metrics::exporter::prepare(&settings.metrics, &node, &settings.broker.broker_ip1).await?
    else {
        return Ok(None);
    };
    server_config.rpc_observer = Some(Arc::new(prepared.rpc));
    prepared.metrics.register_collector(Box::new(BrokerCollector { broker: Arc::downgrade(broker) }));
    Ok(Some((prepared.listener, prepared.metrics)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_types_follow_javas_order_of_checks() {
        let props = |pairs: &[(&str, &str)]| {
            let mut p = MessageProperties::default();
            for (k, v) in pairs {
                p.insert(*k, *v);
            }
            p
        };
        assert_eq!(MESSAGE_TYPES[message_type(0, &props(&[]))], "normal");
        assert_eq!(MESSAGE_TYPES[message_type(0, &props(&[(keys::SHARDING_KEY, "g1")]))], "fifo");
        assert_eq!(MESSAGE_TYPES[message_type(0, &props(&[(keys::DELAY, "3")]))], "delay");
        assert_eq!(MESSAGE_TYPES[message_type(0, &props(&[(keys::DELAY, "0")]))], "normal");
        assert_eq!(MESSAGE_TYPES[message_type(0, &props(&[(keys::TIMER_DELIVER_MS, "17000")]))], "delay");
        assert_eq!(MESSAGE_TYPES[message_type(0, &props(&[(keys::START_DELIVER_TIME, "17000")]))], "delay");
        assert_eq!(MESSAGE_TYPES[message_type(0, &props(&[(keys::START_DELIVER_TIME, "0")]))], "normal");
        let prepared = sysflag::TRANSACTION_PREPARED_TYPE;
        assert_eq!(MESSAGE_TYPES[message_type(prepared, &props(&[(keys::SHARDING_KEY, "g1")]))], "transaction");
    }

    #[test]
    fn rows_are_kept_per_topic_and_pair_and_forgotten_with_the_topic() {
        let m = BrokerMetrics::new(100);
        m.messages_stored("T", 0, [8, 12].into_iter());
        m.messages_stored("T", 2, std::iter::once(5));
        m.message_out(&BrokerStats::group_key("T", "g"), 2, 20);
        m.dead_lettered("T", "g", 1);
        m.transaction_ended("T", true);
        m.transaction_ended("T", false);
        m.transaction_ended("T", false);
        assert_eq!(m.stored.snapshot().0[0].1[..SIZES], [2, 20, 0, 0, 1, 5, 0, 0]);
        assert_eq!(m.messages_out.snapshot().0, vec![("T@g".to_owned(), [2, 20])]);
        assert_eq!(m.transactions.snapshot().0, vec![("T".to_owned(), [1, 2])]);
        m.messages_stored("T", 1, [10, 1024, 1025, 5_000_000].into_iter());
        let (rows, _) = m.stored.snapshot();
        let sum = 10 + 1024 + 1025 + 5_000_000;
        assert_eq!(rows[0].1[..SIZES], [2, 20, 4, sum, 1, 5, 0, 0]);
        let fifo = &rows[0].1[SIZES + 8..SIZES + 16];
        assert_eq!(fifo, &[2, 1, 0, 0, 0, 0, 1, sum]);
        assert_eq!(rows[0].1[SIZES..SIZES + 8], [2, 0, 0, 0, 0, 0, 0, 20], "normal: 8 and 12 bytes");
        m.transaction_finished("T", 61);
        assert_eq!(m.finish_latency.snapshot().0[0].1, [0, 0, 1, 0, 0, 0, 0, 61]);
        m.topic_created(std::time::Duration::from_millis(150));
        assert_eq!(m.create_time.snapshot().0, vec![("topic".to_owned(), [0, 0, 1, 0, 0, 0, 150])]);
        m.on_topic_deleted("T");
        assert!(m.stored.is_empty() && m.messages_out.is_empty() && m.send_to_dlq.is_empty());
        assert!(m.finish_latency.is_empty());
    }
}
