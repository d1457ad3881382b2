//! Admin queries and offset operations: UPDATE_BROKER_CONFIG (25), GET_ALL_DELAY_OFFSET (45),
//! GET_TOPIC_STATS_INFO (202), GET_CONSUMER_CONNECTION_LIST (203), GET_PRODUCER_CONNECTION_LIST
//! (204), GET_CONSUME_STATS (208), INVOKE_BROKER_TO_RESET_OFFSET (222),
//! QUERY_TOPIC_CONSUME_BY_WHO (300), GET_CONSUMER_RUNNING_INFO (307) and CONSUME_MESSAGE_DIRECTLY (309)
//! (both forwarded to the client),
//! CLONE_GROUP_OFFSET (314).
//! Java: `AdminBrokerProcessor`, `Broker2Client#resetOffset` / `#callClient`.
//!
//! Not tracked yet, so reported as 0: put TPS per topic and consume TPS per group (Java's
//! `BrokerStatsManager`). Java's pull-offset table is not kept either, so a queue's pull offset
//! is reported as its consumer offset.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use ferromq_config::replace_file;
use ferromq_protocol::body::{
    BrokerStatsData, BrokerStatsItem, Connection as ConnectionBody, ConsumeStats, ConsumeStatsList, ConsumerConnection,
    GroupList, JsonBody, MessageQueue, OffsetWrapper, ProducerConnection, ProducerInfo, ProducerTableInfo,
    ResetOffsetBody, TopicConfig, TopicOffset, TopicStatsTable,
};
use ferromq_protocol::header::{
    CloneGroupOffsetRequestHeader, GetConsumeStatsInBrokerHeader, GetConsumeStatsRequestHeader,
    GetConsumerConnectionListRequestHeader, GetConsumerRunningInfoRequestHeader,
    GetProducerConnectionListRequestHeader, GetTopicStatsInfoRequestHeader, QueryTopicConsumeByWhoRequestHeader,
    ResetOffsetRequestHeader, ViewBrokerStatsDataRequestHeader,
};
use ferromq_protocol::message::decode_offset_msg_id;
use ferromq_protocol::{properties_text, request_code, response_code, LanguageCode, RemotingCommand};
use ferromq_remoting::{Connection, RemotingError};
use tokio::task::JoinSet;
use tracing::{debug, info, warn};

use crate::broker::Broker;
use crate::client::ClientChannelInfo;
use crate::processor::{failure, header_or_fail, success};
use crate::stats::{clock_ms, BrokerStats};

/// Keys UPDATE_BROKER_CONFIG always refuses, whatever `configBlackList` says.
/// Java: `AdminBrokerProcessor#initConfigBlackList`.
const ALWAYS_BLACK_LISTED_KEYS: [&str; 3] = ["brokerConfigPath", "rocketmqHome", "configBlackList"];
/// The `configBlackList` key and its Java default, used when broker.conf does not set it.
const CONFIG_BLACK_LIST_KEY: &str = "configBlackList";
/// Largest UPDATE_BROKER_CONFIG body: a broker.conf is a few KiB.
const UPDATE_BROKER_CONFIG_BODY_MAX: usize = 64 * 1024;
const CONFIG_BLACK_LIST_DEFAULT: &str = "configBlackList;brokerConfigPath";

/// How long an offset reset waits for RESET_CONSUMER_CLIENT_OFFSET to be queued on the
/// consumers' connections before answering; the notices are advisory.
const RESET_NOTIFY_TIMEOUT: Duration = Duration::from_secs(1);
/// Clients older than this (`V3_0_7_SNAPSHOT`) do not understand RESET_CONSUMER_CLIENT_OFFSET.
const RESET_CLIENT_MIN_VERSION: i32 = 28;
/// Clients older than this (`V3_1_8_SNAPSHOT`) cannot answer requests forwarded to them.
const CALL_CLIENT_MIN_VERSION: i32 = 62;
/// How long a request forwarded to a client may take. Java: `Broker2Client#callClient`.
pub(crate) const CALL_CLIENT_TIMEOUT: Duration = Duration::from_secs(10);

/// Blank as Java's `UtilAll.isBlank`: absent, empty or whitespace only.
fn non_blank(text: Option<&str>) -> Option<&str> {
    text.filter(|t| !t.trim().is_empty())
}

/// A registered client as the connection listings show it.
fn connection_body(info: &ClientChannelInfo) -> ConnectionBody {
    ConnectionBody {
        client_addr: info.connection.remote_addr().to_string(),
        client_id: info.client_id.clone(),
        language: info.language,
        version: info.version,
    }
}

/// Connections sorted by client id, then address, so listings are stable.
fn connection_set<'a>(infos: impl Iterator<Item = &'a ClientChannelInfo>) -> Vec<ConnectionBody> {
    let mut set: Vec<ConnectionBody> = infos.map(connection_body).collect();
    set.sort_by(|a, b| a.client_id.cmp(&b.client_id).then_with(|| a.client_addr.cmp(&b.client_addr)));
    set
}

impl Broker {
    /// Every queue's offset range and the store time of its last message (0 for an empty
    /// queue, -1 when that message can no longer be read, as Java's
    /// `getMessageStoreTimeStamp`). Java: `AdminBrokerProcessor#getTopicStatsInfo`.
    pub(crate) fn get_topic_stats_info(&self, req: &RemotingCommand) -> RemotingCommand {
        let h = header_or_fail!(req, GetTopicStatsInfoRequestHeader);
        let Some(config) = self.topics().select(&h.topic) else {
            return failure(req, response_code::TOPIC_NOT_EXIST, format!("topic[{}] not exist", h.topic));
        };
        let queue_nums = config.write_queue_nums.max(config.read_queue_nums);
        let offset_table = (0..queue_nums)
            .map(|queue_id| {
                let min_offset = self.store.min_offset_in_queue(&h.topic, queue_id).max(0);
                let max_offset = self.store.max_offset_in_queue(&h.topic, queue_id).max(0);
                let last_update_timestamp = if max_offset > 0 {
                    self.store.message_store_time(&h.topic, queue_id, max_offset - 1).unwrap_or(-1)
                } else {
                    0
                };
                let offset = TopicOffset { last_update_timestamp, max_offset, min_offset };
                (self.queue(&h.topic, queue_id), offset)
            })
            .collect();
        let table =
            TopicStatsTable { offset_table, topic_put_tps: self.stats.topic_put_nums.rate(&h.topic, clock_ms()) };
        success(req).with_body(table.encode())
    }

    /// The members of a consumer group and how it consumes; CONSUMER_NOT_ONLINE when it has
    /// none. Java: `AdminBrokerProcessor#getConsumerConnectionList`.
    pub(crate) fn get_consumer_connection_list(&self, req: &RemotingCommand) -> RemotingCommand {
        let h = header_or_fail!(req, GetConsumerConnectionListRequestHeader);
        let Some(group) = self.consumers.group(&h.consumer_group) else {
            return failure(
                req,
                response_code::CONSUMER_NOT_ONLINE,
                format!("the consumer group[{}] not online", h.consumer_group),
            );
        };
        let body = ConsumerConnection {
            connection_set: connection_set(group.channels.values()),
            consume_from_where: group.consume_from_where,
            consume_type: group.consume_type,
            message_model: group.message_model,
            subscription_table: group.subscriptions.clone(),
        };
        success(req).with_body(body.encode())
    }

    /// The connections of a producer group; SYSTEM_ERROR when it has none.
    /// Java: `AdminBrokerProcessor#getProducerConnectionList`.
    pub(crate) fn get_producer_connection_list(&self, req: &RemotingCommand) -> RemotingCommand {
        let h = header_or_fail!(req, GetProducerConnectionListRequestHeader);
        let infos = self.producers.group_connections(&h.producer_group);
        if infos.is_empty() {
            return failure(
                req,
                response_code::SYSTEM_ERROR,
                format!("the producer group[{}] not exist", h.producer_group),
            );
        }
        let body = ProducerConnection { connection_set: connection_set(infos.iter()) };
        success(req).with_body(body.encode())
    }

    /// VIEW_BROKER_STATS_DATA (315): one counter's minute, hour and day totals, as
    /// `mqadmin statsAll` reads them: `TOPIC_PUT_NUMS` of a topic, `GROUP_GET_NUMS` of
    /// `topic@group`. A counter the broker does not keep (another name, or a key never
    /// counted) gets SYSTEM_ERROR, as Java answers. Java: `AdminBrokerProcessor#ViewBrokerStatsData`.
    pub(crate) fn view_broker_stats_data(&self, req: &RemotingCommand) -> RemotingCommand {
        let h = header_or_fail!(req, ViewBrokerStatsDataRequestHeader);
        let set = match h.stats_name.as_str() {
            "TOPIC_PUT_NUMS" => Some(&self.stats.topic_put_nums),
            "GROUP_GET_NUMS" => Some(&self.stats.group_get_nums),
            _ => None,
        };
        let Some([minute, hour, day]) = set.and_then(|set| set.snapshots(&h.stats_key, clock_ms())) else {
            return failure(
                req,
                response_code::SYSTEM_ERROR,
                format!("The stats <{}> <{}> not exist", h.stats_name, h.stats_key),
            );
        };
        let item = |s: crate::stats::Snapshot| BrokerStatsItem {
            avgpt: s.avgpt,
            sum: i64::try_from(s.sum).unwrap_or(i64::MAX),
            tps: s.tps,
        };
        let data = BrokerStatsData { stats_day: item(day), stats_hour: item(hour), stats_minute: item(minute) };
        success(req).with_body(data.encode())
    }

    /// GET_ALL_PRODUCER_INFO (328): every producer group's clients (`mqadmin producer`).
    /// Java: `ProducerManager#getProducerTable`.
    pub(crate) fn get_all_producer_info(&self, req: &RemotingCommand) -> RemotingCommand {
        let data = self
            .producers
            .table()
            .into_iter()
            .map(|(group, infos)| {
                let producers = infos
                    .into_iter()
                    .map(|info| ProducerInfo {
                        // Java prints the socket address: `/ip:port`.
                        remote_ip: format!("/{}", info.connection.remote_addr()),
                        client_id: info.client_id,
                        language: info.language,
                        last_update_timestamp: info.last_update_ms,
                        version: info.version,
                    })
                    .collect();
                (group, producers)
            })
            .collect();
        success(req).with_body(ProducerTableInfo { data }.encode())
    }

    /// A consumer group's progress on every readable queue of the asked topics: the broker's
    /// max offset, the committed offset (a pending reset counts; 0 if none), and the store
    /// time of the last consumed message. Java: `AdminBrokerProcessor#getConsumeStats`.
    pub(crate) fn get_consume_stats(&self, req: &RemotingCommand) -> RemotingCommand {
        let h = header_or_fail!(req, GetConsumeStatsRequestHeader);
        let group = h.consumer_group.as_str();
        let mut stats = ConsumeStats::default();
        let now = clock_ms();
        for topic in self.consume_stats_topics(&h) {
            stats.consume_tps += self.stats.group_get_nums.rate(&BrokerStats::group_key(&topic, group), now);
            let Some(config) = self.topics().select(&topic) else {
                warn!(topic = %topic, consumer_group = group, "consume stats: topic does not exist");
                continue;
            };
            let mut progress = self.queue_progress(group, &topic, config.read_queue_nums);
            if self.mappings().get(&topic).is_some() {
                // A static topic's queue the group never committed on says -1, not 0, as in
                // Java: the admin tools take the consumer offset from the newest item that has
                // one, and a 0 there would hide the offset on an older item.
                for (queue, wrapper) in &mut progress {
                    if self.offsets().query_offset(group, &topic, queue.queue_id).is_none() {
                        wrapper.consumer_offset = -1;
                    }
                }
            }
            stats.offset_table.extend(progress);
        }
        success(req).with_body(stats.encode())
    }

    /// A group's progress on queues `0..queues` of `topic`: the broker's max offset, the
    /// committed offset (a pending reset counts; 0 if none), and the store time of the last
    /// consumed message.
    pub(crate) fn queue_progress(
        &self,
        group: &str,
        topic: &str,
        queues: i32,
    ) -> BTreeMap<MessageQueue, OffsetWrapper> {
        (0..queues)
            .map(|queue_id| {
                let broker_offset = self.store.max_offset_in_queue(topic, queue_id).max(0);
                let consumer_offset = self.offsets().query_offset(group, topic, queue_id).unwrap_or(0).max(0);
                let last_timestamp = match consumer_offset - 1 {
                    last if last >= 0 => {
                        self.store.message_store_time(topic, queue_id, last).filter(|t| *t > 0).unwrap_or(0)
                    }
                    _ => 0,
                };
                // A pop group's offset moves at pop time: what it popped and has not
                // acknowledged yet counts as not consumed (consumerOffset below pullOffset).
                let in_flight = self.pop.inflight.get(topic, group, queue_id);
                // Popped but not committed yet (checkpoint still buffered).
                let consumer_offset = self
                    .pop
                    .buffer
                    .as_ref()
                    .and_then(|b| b.latest_offset(&crate::pop::lock_key(topic, group, queue_id)))
                    .map_or(consumer_offset, |latest| latest.max(consumer_offset));
                // A pull group's next pull offset (Java's pullOffset), never behind what it
                // committed nor past the queue's end; a pop group's is its popped offset.
                let pulled = self
                    .pull_offsets
                    .query(&crate::stats::BrokerStats::group_key(topic, group), queue_id)
                    .map_or(consumer_offset, |p| p.clamp(consumer_offset, broker_offset.max(consumer_offset)));
                let wrapper = OffsetWrapper {
                    broker_offset,
                    consumer_offset: (consumer_offset - in_flight).max(0),
                    last_timestamp,
                    pull_offset: if in_flight > 0 { consumer_offset } else { pulled },
                };
                (self.queue(topic, queue_id), wrapper)
            })
            .collect()
    }

    /// GET_BROKER_CONSUME_STATS (317): every subscription group's progress on the topics it
    /// has offsets on (with `isOrder`, ordered topics only), skipping topics an online group
    /// does not subscribe to. Java: `AdminBrokerProcessor#fetchAllConsumeStatsInBroker`, which
    /// counts a topic's write queues here.
    pub(crate) fn get_broker_consume_stats(&self, req: &RemotingCommand) -> RemotingCommand {
        let h = header_or_fail!(req, GetConsumeStatsInBrokerHeader);
        let now = clock_ms();
        let mut list = ConsumeStatsList { broker_addr: self.config.broker_addr(), ..Default::default() };
        for group in self.groups().all().subscription_group_table.into_keys() {
            let mut topics = self.offsets().which_topic_by_consumer(&group);
            self.retain_subscribed(&group, &mut topics);
            let mut per_topic = Vec::new();
            for topic in topics {
                let Some(config) = self.topics().select(&topic) else {
                    warn!(topic = %topic, consumer_group = %group, "broker consume stats: topic does not exist");
                    continue;
                };
                if h.is_order && !config.order {
                    continue;
                }
                let stats = ConsumeStats {
                    consume_tps: self.stats.group_get_nums.rate(&BrokerStats::group_key(&topic, &group), now),
                    offset_table: self.queue_progress(&group, &topic, config.write_queue_nums),
                };
                list.total_diff += stats.total_diff();
                per_topic.push(stats);
            }
            list.consume_stats_list.push(BTreeMap::from([(group, per_topic)]));
        }
        success(req).with_body(list.encode())
    }

    /// The topics GET_CONSUME_STATS covers: the `topicList` as given; else the topic, or every
    /// topic the group has offsets on, minus those an online group does not subscribe to.
    /// Java: `AdminBrokerProcessor#getTopicsForCollectingConsumeStats`.
    fn consume_stats_topics(&self, h: &GetConsumeStatsRequestHeader) -> BTreeSet<String> {
        let listed: BTreeSet<String> = h
            .topic_list
            .as_deref()
            .unwrap_or_default()
            .split(';')
            .filter(|t| !t.trim().is_empty())
            .map(str::to_owned)
            .collect();
        if !listed.is_empty() {
            return listed;
        }
        let mut topics = match non_blank(h.topic.as_deref()) {
            Some(topic) => BTreeSet::from([topic.to_owned()]),
            None => self.offsets().which_topic_by_consumer(&h.consumer_group),
        };
        self.retain_subscribed(&h.consumer_group, &mut topics);
        topics
    }

    /// Keeps the topics an online `group` subscribes to (all of them for a group offline or
    /// without subscriptions). Java: the subscription checks of `getConsumeStats` and
    /// `fetchAllConsumeStatsInBroker`.
    fn retain_subscribed(&self, group: &str, topics: &mut BTreeSet<String>) {
        if let Some(online) = self.consumers.group(group).filter(|g| !g.subscriptions.is_empty()) {
            topics.retain(|topic| {
                let subscribed = online.subscriptions.contains_key(topic);
                if !subscribed {
                    warn!(topic = %topic, consumer_group = group, "consume stats: topic not in the group's subscriptions");
                }
                subscribed
            });
        }
    }

    /// The consumer groups of a topic: those subscribing to it now and those with committed
    /// offsets on it. Java: `AdminBrokerProcessor#queryTopicConsumeByWho`.
    pub(crate) fn query_topic_consume_by_who(&self, req: &RemotingCommand) -> RemotingCommand {
        let h = header_or_fail!(req, QueryTopicConsumeByWhoRequestHeader);
        let mut group_list = self.consumers.query_topic_consume_by_who(&h.topic);
        group_list.extend(self.offsets().which_group_by_topic(&h.topic));
        success(req).with_body(GroupList { group_list }.encode())
    }

    /// Copies `srcGroup`'s committed offsets to `destGroup`, for the topic or, when it is
    /// blank, every topic `srcGroup` has offsets on. Unknown topics are skipped, and unless
    /// `offline`, so are topics an online `srcGroup` does not subscribe to.
    /// Java: `AdminBrokerProcessor#cloneGroupOffset`, which for a blank topic passes the blank
    /// topic on to `cloneOffset` and so copies nothing; here each topic is copied.
    pub(crate) fn clone_group_offset(&self, req: &RemotingCommand) -> RemotingCommand {
        let h = header_or_fail!(req, CloneGroupOffsetRequestHeader);
        let topics = match non_blank(h.topic.as_deref()) {
            Some(topic) => BTreeSet::from([topic.to_owned()]),
            None => self.offsets().which_topic_by_consumer(&h.src_group),
        };
        let online = self.consumers.group(&h.src_group).filter(|g| !g.subscriptions.is_empty());
        for topic in topics {
            if !self.topics().contains(&topic) {
                warn!(topic = %topic, "clone group offset: topic does not exist");
                continue;
            }
            if h.offline != Some(true) && online.as_ref().is_some_and(|g| !g.subscriptions.contains_key(&topic)) {
                warn!(topic = %topic, src_group = %h.src_group,
                    "clone group offset: topic not in the group's subscriptions");
                continue;
            }
            self.offsets().clone_offset(&h.src_group, &h.dest_group, &topic);
        }
        success(req)
    }

    /// The delay-level progress table, as Java writes delayOffset.json (unquoted integer keys).
    /// Java: `AdminBrokerProcessor#getAllDelayOffset`.
    pub(crate) fn get_all_delay_offset(&self, req: &RemotingCommand) -> RemotingCommand {
        success(req).with_body(self.delay_offsets().snapshot().encode_fastjson())
    }

    /// Applies a properties-text body to the broker settings; black-listed keys
    /// (`brokerConfigPath`, `rocketmqHome`, `configBlackList` and broker.conf's
    /// `configBlackList`) are refused with NO_PERMISSION and nothing is applied. A bad value
    /// fails the whole update with SYSTEM_ERROR (Java skips it silently).
    ///
    /// The updated settings are written back, every key, to
    /// [`BrokerSettings::config_store_path`](crate::BrokerSettings::config_store_path) (the
    /// `-c` file when the broker started from one), atomically, before they replace the
    /// in-memory settings GET_BROKER_CONFIG reports; if the write fails the update answers
    /// SYSTEM_ERROR and nothing changes (Java logs the failure and answers SUCCESS). The
    /// running broker works from the settings it started with, so most keys take effect at the
    /// next start; `brokerPermission` takes effect at once and is re-registered with the name
    /// servers (topics registered with the broker's permission masked in, as Java).
    /// Java: `AdminBrokerProcessor#updateBrokerConfig`, `Configuration#update`/`#persist`.
    pub(crate) fn update_broker_config(&self, conn: &Connection, req: &RemotingCommand) -> RemotingCommand {
        info!(caller = %conn.remote_addr(), "broker config update requested");
        if req.body.is_empty() {
            return success(req);
        }
        if req.body.len() > UPDATE_BROKER_CONFIG_BODY_MAX {
            return failure(
                req,
                response_code::SYSTEM_ERROR,
                format!(
                    "broker config update of {} bytes refused: at most {UPDATE_BROKER_CONFIG_BODY_MAX} bytes",
                    req.body.len()
                ),
            );
        }
        let text = String::from_utf8_lossy(&req.body);
        let entries = match properties_text::parse(&text) {
            Ok(entries) => entries,
            Err(e) => return failure(req, response_code::SYSTEM_ERROR, format!("string2Properties error: {e}")),
        };
        let black_list = self.config_black_list();
        if let Some((key, _)) = entries.iter().find(|(k, _)| black_list.iter().any(|b| b == k)) {
            warn!(key = %key, caller = %conn.remote_addr(), "refused to update a black-listed broker config key");
            return failure(req, response_code::NO_PERMISSION, "Can not update config in black list.");
        }
        // Held across the write so concurrent updates reach the file in the order they apply.
        let mut settings = self.settings.write().unwrap_or_else(|e| e.into_inner());
        let mut updated = settings.clone();
        let known_before = settings.broker.unknown.clone();
        let unknown = match updated.apply_text(&text) {
            Ok(unknown) => unknown,
            Err(e) => return failure(req, response_code::SYSTEM_ERROR, e.to_string()),
        };
        // Only keys the broker knows, or broker.conf already holds, are merged (Java's
        // `Configuration#mergeIfExist`); Java drops the others silently, here the update is
        // refused whole and says which.
        let foreign: Vec<&String> = unknown.iter().filter(|k| !known_before.contains_key(k.as_str())).collect();
        if !foreign.is_empty() {
            let listed: Vec<String> = foreign.iter().take(10).map(|k| format!("{k:?}")).collect();
            warn!(keys = foreign.len(), caller = %conn.remote_addr(), "broker config update with unknown keys refused");
            return failure(
                req,
                response_code::SYSTEM_ERROR,
                format!(
                    "unknown broker config key(s), nothing applied: {}{}",
                    listed.join(", "),
                    if foreign.len() > listed.len() {
                        format!(" and {} more", foreign.len() - listed.len())
                    } else {
                        String::new()
                    }
                ),
            );
        }
        if let Err(reason) = crate::config::check_max_message_size(updated.store.max_message_size) {
            return failure(req, response_code::SYSTEM_ERROR, reason);
        }
        let path = updated.config_store_path();
        if let Err(e) = replace_file(&path, updated.to_text().as_bytes()) {
            // The OS reason is the error's source; the remark carries it to the admin tool.
            let reason = std::error::Error::source(&e).map_or_else(|| e.to_string(), |s| format!("{e}: {s}"));
            warn!(path = %path.display(), error = %reason, "broker config update not persisted; nothing applied");
            return failure(
                req,
                response_code::SYSTEM_ERROR,
                format!("cannot persist the broker config to {}: {reason}", path.display()),
            );
        }
        let permission = updated.broker.broker_permission;
        let max_message_size = updated.store.max_message_size;
        *settings = updated;
        drop(settings);
        self.set_permission(permission);
        // Java applies maxMessageSize on the next put.
        self.store.set_max_message_size(max_message_size);
        info!(keys = entries.len(), ?unknown, path = %path.display(), caller = %conn.remote_addr(), "broker config updated");
        success(req)
    }

    /// The keys UPDATE_BROKER_CONFIG refuses: the fixed ones plus broker.conf's
    /// `configBlackList` as started (Java reads it once, when the processor is built).
    fn config_black_list(&self) -> Vec<String> {
        let configured =
            self.config.unknown.get(CONFIG_BLACK_LIST_KEY).map_or(CONFIG_BLACK_LIST_DEFAULT, String::as_str);
        ALWAYS_BLACK_LISTED_KEYS
            .iter()
            .copied()
            .chain(configured.split(';').map(str::trim).filter(|k| !k.is_empty()))
            .map(str::to_owned)
            .collect()
    }

    /// Resets a consumer group's offsets on a topic to the offset at `timestamp` (the end for
    /// -1), or, for one `queueId`, to an explicit `offset`; answers the new offsets and sends
    /// them to the group's online consumers as RESET_CONSUMER_CLIENT_OFFSET (oneway, waiting
    /// at most [`RESET_NOTIFY_TIMEOUT`]).
    ///
    /// The reset is Java 5.x's server-side one (`useServerSideResetOffset`, the default): the
    /// committed offsets are overwritten and the reset stays pending until the queue's next
    /// pull takes it (answered PULL_OFFSET_MOVED with the reset as nextBeginOffset; commits
    /// of the queue are ignored meanwhile). `isForce` is ignored, as in 5.x, and
    /// passed on to the consumers. Java 5.x notifies nobody; the notice is Java 4.x's
    /// (`Broker2Client#resetOffset`), for clients that do not learn of resets from pulls.
    /// Unlike 4.x, no consumer being online is not an error. C++ clients get the list form of
    /// the body (Java picks that form by the admin request's language instead).
    /// Java: `AdminBrokerProcessor#resetOffset`/`#resetOffsetInner`.
    pub(crate) async fn invoke_broker_to_reset_offset(&self, req: &RemotingCommand) -> RemotingCommand {
        let h = header_or_fail!(req, ResetOffsetRequestHeader);
        info!(topic = %h.topic, group = %h.group, queue_id = ?h.queue_id, offset = ?h.offset, timestamp = h.timestamp,
            force = h.is_force, "consumer offset reset requested");
        let body = match self.reset_offsets(&h) {
            Ok(body) => body,
            Err((code, remark)) => {
                warn!(topic = %h.topic, group = %h.group, remark = %remark, "consumer offset reset refused");
                return failure(req, code, remark);
            }
        };
        self.notify_reset(&h, &body).await;
        success(req).with_body(body.encode())
    }

    /// Validates the request and records the resets. Errors are a response code and remark.
    fn reset_offsets(&self, h: &ResetOffsetRequestHeader) -> Result<ResetOffsetBody, (i32, String)> {
        if self.is_slave() {
            return Err((response_code::SYSTEM_ERROR, "Can not reset offset in slave broker".to_owned()));
        }
        let Some(config) = self.topics().select(&h.topic) else {
            return Err((response_code::TOPIC_NOT_EXIST, format!("Topic {} does not exist", h.topic)));
        };
        if !self.groups().contains(&h.group) {
            return Err((response_code::SUBSCRIPTION_GROUP_NOT_EXIST, format!("Group {} does not exist", h.group)));
        }
        let targets = self.reset_targets(h, &config)?;
        if targets.is_empty() {
            return Err((response_code::SYSTEM_ERROR, "No queues to reset.".to_owned()));
        }
        let mut body = ResetOffsetBody::default();
        self.pull_offsets.forget(&crate::stats::BrokerStats::group_key(&h.topic, &h.group));
        for (queue_id, offset) in targets {
            self.offsets().reset_offset(&h.group, &h.topic, queue_id, offset);
            body.offset_table.insert(self.queue(&h.topic, queue_id), offset);
        }
        info!(topic = %h.topic, group = %h.group, queues = body.offset_table.len(), "consumer offsets reset");
        Ok(body)
    }

    /// Queue id -> the offset to reset it to.
    fn reset_targets(
        &self,
        h: &ResetOffsetRequestHeader,
        config: &TopicConfig,
    ) -> Result<BTreeMap<i32, i64>, (i32, String)> {
        let by_time = |queue_id: i32| {
            if h.timestamp < 0 {
                self.store.max_offset_in_queue(&h.topic, queue_id)
            } else {
                self.store.offset_in_queue_by_time(&h.topic, queue_id, h.timestamp, true)
            }
        };
        match h.queue_id.filter(|q| *q >= 0) {
            Some(queue_id) => {
                let offset = match h.offset.filter(|o| *o != -1) {
                    Some(offset) => {
                        let min = self.store.min_offset_in_queue(&h.topic, queue_id);
                        let max = self.store.max_offset_in_queue(&h.topic, queue_id);
                        if min >= 0 && offset < min || offset > max + 1 {
                            let remark = format!("Target offset {offset} not in consume queue range [{min}-{max}]");
                            return Err((response_code::SYSTEM_ERROR, remark));
                        }
                        offset
                    }
                    None => by_time(queue_id),
                };
                Ok(BTreeMap::from([(queue_id, offset)]))
            }
            None => Ok((0..config.read_queue_nums).map(|queue_id| (queue_id, by_time(queue_id))).collect()),
        }
    }

    /// Sends RESET_CONSUMER_CLIENT_OFFSET oneway to every online member of the group, all at
    /// once, giving up on those not queued within [`RESET_NOTIFY_TIMEOUT`]. Failures are
    /// logged; the reset itself is already recorded.
    async fn notify_reset(&self, h: &ResetOffsetRequestHeader, body: &ResetOffsetBody) {
        let members = self.consumers.connections(&h.group);
        if members.is_empty() {
            debug!(topic = %h.topic, group = %h.group, "no consumer online to tell of the offset reset");
            return;
        }
        let header = ResetOffsetRequestHeader {
            topic: h.topic.clone(),
            group: h.group.clone(),
            queue_id: Some(h.queue_id.unwrap_or(-1)),
            offset: None,
            timestamp: h.timestamp,
            is_force: h.is_force,
        };
        let mut request = RemotingCommand::request(request_code::RESET_CONSUMER_CLIENT_OFFSET).with_header(&header);
        // The Java broker's requests say JAVA; clients see the same here.
        request.language = LanguageCode::Java;
        let java_request = request.clone().with_body(body.encode());
        let c_request = request.with_body(body.to_c_body().encode());
        let mut sends = JoinSet::new();
        for member in members {
            if member.version < RESET_CLIENT_MIN_VERSION {
                warn!(group = %h.group, client_id = %member.client_id, version = member.version,
                    "client too old for RESET_CONSUMER_CLIENT_OFFSET; not told of the reset");
                continue;
            }
            let request = if member.language == LanguageCode::Cpp { c_request.clone() } else { java_request.clone() };
            sends.spawn(async move {
                let outcome = member.connection.invoke_oneway(request).await;
                (member.client_id, outcome)
            });
        }
        let all_sent = tokio::time::timeout(RESET_NOTIFY_TIMEOUT, async {
            while let Some(joined) = sends.join_next().await {
                match joined {
                    Ok((client_id, Ok(()))) => info!(topic = %h.topic, group = %h.group, client_id = %client_id,
                        "consumer told of the offset reset"),
                    Ok((client_id, Err(e))) => warn!(topic = %h.topic, group = %h.group, client_id = %client_id,
                        error = %e, "consumer not told of the offset reset"),
                    Err(e) => warn!(error = %e, "offset reset notice task failed"),
                }
            }
        })
        .await;
        if all_sent.is_err() {
            warn!(topic = %h.topic, group = %h.group, left = sends.len(), timeout = ?RESET_NOTIFY_TIMEOUT,
                "offset reset notices not queued in time; given up");
            sends.abort_all();
        }
    }

    /// Asks the named consumer client for its running info and answers with what it answers.
    /// Java: `AdminBrokerProcessor#getConsumerRunningInfo`.
    pub(crate) async fn get_consumer_running_info(&self, req: &RemotingCommand) -> RemotingCommand {
        let h = header_or_fail!(req, GetConsumerRunningInfoRequestHeader);
        self.call_consumer(req, &h.consumer_group, &h.client_id).await
    }

    /// Has the named consumer client consume one stored message now (`mqadmin
    /// consumeMessage`, the dashboard's resend): the request goes to the client with the
    /// broker name, the topic's and group's sys flags and the message as its body.
    /// Java: `AdminBrokerProcessor#consumeMessageDirectly`.
    pub(crate) async fn consume_message_directly(&self, req: &RemotingCommand) -> RemotingCommand {
        let Some(group) = req.ext("consumerGroup").map(str::to_owned) else {
            return failure(req, response_code::SYSTEM_ERROR, "the custom field <consumerGroup> is null");
        };
        let client_id = req.ext("clientId").unwrap_or_default().to_owned();
        let mut forwarded = req.clone();
        forwarded.ext_fields.insert("brokerName".into(), self.config.broker_name.as_str());
        if let Some(topic) = req.ext("topic").filter(|t| !t.is_empty()).and_then(|t| self.topics().select(t)) {
            forwarded.ext_fields.insert("topicSysFlag".into(), &topic.topic_sys_flag.to_string());
        }
        if let Some(g) = self.groups().find(&group, false) {
            forwarded.ext_fields.insert("groupSysFlag".into(), &g.group_sys_flag.to_string());
        }
        let msg_id = req.ext("msgId").unwrap_or_default();
        let message =
            decode_offset_msg_id(msg_id).ok().and_then(|(_, offset)| self.store.look_message_by_offset(offset));
        let Some(message) = message else {
            return failure(req, response_code::SYSTEM_ERROR, format!("can not find message by the msgId, {msg_id}"));
        };
        forwarded.body = message;
        self.call_consumer(&forwarded, &group, &client_id).await
    }

    /// Forwards `req` (code, header fields and body) to the connection of `client_id` in
    /// `group` and returns the client's response; SYSTEM_ERROR when the client is not online
    /// or too old, CONSUME_MSG_TIMEOUT when it does not answer in time.
    /// Java: `AdminBrokerProcessor#callConsumer`, `Broker2Client#callClient`.
    async fn call_consumer(&self, req: &RemotingCommand, group: &str, client_id: &str) -> RemotingCommand {
        let Some(member) = self.consumers.find_channel(group, client_id) else {
            return failure(
                req,
                response_code::SYSTEM_ERROR,
                format!("The Consumer <{group}> <{client_id}> not online"),
            );
        };
        if member.version < CALL_CLIENT_MIN_VERSION {
            let remark = format!(
                "The Consumer <{client_id}> Version <{}> too low to finish, please upgrade it to V3_1_8_SNAPSHOT",
                member.version
            );
            return failure(req, response_code::SYSTEM_ERROR, remark);
        }
        let mut forwarded = RemotingCommand::request(req.code);
        // The Java broker's requests say JAVA; clients see the same here.
        forwarded.language = LanguageCode::Java;
        forwarded.ext_fields = req.ext_fields.clone();
        forwarded.body = req.body.clone();
        match member.connection.invoke(forwarded, CALL_CLIENT_TIMEOUT).await {
            Ok(mut response) => {
                debug!(group, client_id, code = response.code, "consumer answered a forwarded request");
                response.opaque = req.opaque;
                response
            }
            Err(e @ RemotingError::Timeout { .. }) => {
                warn!(group, client_id, error = %e, "consumer did not answer a forwarded request in time");
                failure(
                    req,
                    response_code::CONSUME_MSG_TIMEOUT,
                    format!("consumer <{group}> <{client_id}> Timeout: {e}"),
                )
            }
            Err(e) => {
                warn!(group, client_id, error = %e, "request forwarded to a consumer failed");
                failure(
                    req,
                    response_code::SYSTEM_ERROR,
                    format!("invoke consumer <{group}> <{client_id}> Exception: {e}"),
                )
            }
        }
    }

    /// The queue `queue_id` of `topic` on this broker.
    fn queue(&self, topic: &str, queue_id: i32) -> MessageQueue {
        MessageQueue::new(topic, self.config.broker_name.as_str(), queue_id)
    }
}
