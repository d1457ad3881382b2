//! The requests brokers send to a client, and the clients' side of them:
//! CHECK_TRANSACTION_STATE (39) asks a transactional producer about a half message,
//! NOTIFY_CONSUMER_IDS_CHANGED (40) wakes the group's rebalance, RESET_CONSUMER_CLIENT_OFFSET
//! (220) moves the group's queues to new offsets, GET_CONSUMER_RUNNING_INFO (307) reports the
//! group's state for an admin tool. Every other code gets REQUEST_CODE_NOT_SUPPORTED.
//! Java: `ClientRemotingProcessor`, `MQClientInstance#resetOffset` / `#consumerRunningInfo`.
//!
//! The consumers do the work through [`ConsumerControl`], transactional producers through the
//! bounded queue of [`TransactionChecks`]; this module only decodes, finds the group and
//! answers.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};

use ferromq_protocol::body::{
    ConsumeType, ConsumerRunningInfo, JsonBody, MessageQueue, ResetOffsetBody, ResetOffsetBodyForC,
    PROP_CLIENT_VERSION, PROP_CONSUME_TYPE, PROP_NAMESERVER_ADDR,
};
use ferromq_protocol::civil_date::civil_from_days;
use ferromq_protocol::header::{
    CheckTransactionStateRequestHeader, GetConsumerRunningInfoRequestHeader, NotifyConsumerIdsChangedRequestHeader,
    ResetOffsetRequestHeader,
};
use ferromq_protocol::message::keys;
use ferromq_protocol::{request_code, response_code, RemotingCommand};
use ferromq_remoting::{Connection, Dispatcher};
use tokio::sync::{mpsc, Notify};
use tracing::{debug, info, warn};

use crate::client_instance::{lock, ClientConfig};
use crate::message_ext::{decode_checked, MessageExt};

/// Java's name of [`ferromq_protocol::version::CURRENT`], the version this client reports
/// (`MQVersion.getVersionDesc`).
pub(crate) const CLIENT_VERSION_DESC: &str = "V5_3_3";

/// A boxed future of a consumer operation.
pub(crate) type ControlFuture = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// What a running consumer lets brokers (on behalf of admin tools) do. Java: the parts of
/// `MQConsumerInner` `ClientRemotingProcessor` uses.
pub(crate) trait ConsumerControl: Send + Sync {
    /// Push (`ConsumePassively`) or pull (`ConsumeActively`). Java: `consumeType`.
    fn consume_type(&self) -> ConsumeType;

    /// The consumer's settings, subscriptions, queues and rates, without the instance-wide
    /// properties the handler adds. Java: `MQConsumerInner#consumerRunningInfo`.
    fn running_info(&self) -> ConsumerRunningInfo;

    /// What a request with `jstackEnable` gets in place of a JVM thread dump: the consumer's
    /// tasks and queues, one per line.
    fn task_dump(&self) -> String;

    /// Moves the assigned queues of `topic` that `offsets` names to their new offsets and
    /// commits them; queues not assigned here are left alone. Java: `MQClientInstance#resetOffset`.
    fn reset_offset(self: Arc<Self>, topic: String, offsets: BTreeMap<MessageQueue, i64>) -> ControlFuture;
}

/// A registered consumer group: its rebalance trigger and its control.
struct Registered {
    trigger: Arc<Notify>,
    control: Weak<dyn ConsumerControl>,
}

/// Consumer group -> what the request handlers need of it. Shared by the instance (which
/// registers groups) and the dispatcher (which serves the requests). Holds the consumers
/// weakly: they own the instance, not the other way round.
#[derive(Clone, Default)]
pub(crate) struct ConsumerTable(Arc<Mutex<HashMap<String, Registered>>>);

impl std::fmt::Debug for ConsumerTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut groups: Vec<String> = lock(&self.0).keys().cloned().collect();
        groups.sort();
        f.debug_tuple("ConsumerTable").field(&groups).finish()
    }
}

impl ConsumerTable {
    pub(crate) fn insert(&self, group: &str, trigger: Arc<Notify>, control: Weak<dyn ConsumerControl>) {
        lock(&self.0).insert(group.to_owned(), Registered { trigger, control });
    }

    pub(crate) fn remove(&self, group: &str) {
        lock(&self.0).remove(group);
    }

    fn trigger(&self, group: &str) -> Option<Arc<Notify>> {
        lock(&self.0).get(group).map(|r| r.trigger.clone())
    }

    fn control(&self, group: &str) -> Option<Arc<dyn ConsumerControl>> {
        lock(&self.0).get(group).and_then(|r| r.control.upgrade())
    }
}

/// A broker's question about a half message, for the transactional producer of its group.
#[derive(Debug)]
pub(crate) struct TransactionCheck {
    /// The connection the question came on; the answer goes back on it.
    pub(crate) conn: Connection,
    pub(crate) header: CheckTransactionStateRequestHeader,
    /// The half message with its real topic and queue.
    pub(crate) msg: MessageExt,
}

/// Producer group -> the queue of its transactional producer's check worker. Shared by the
/// instance (which registers producers) and the dispatcher (which queues the checks).
#[derive(Debug, Clone, Default)]
pub(crate) struct TransactionChecks(Arc<Mutex<HashMap<String, mpsc::Sender<TransactionCheck>>>>);

impl TransactionChecks {
    /// False if the group already has a transactional producer here.
    pub(crate) fn insert(&self, group: &str, queue: mpsc::Sender<TransactionCheck>) -> bool {
        let mut groups = lock(&self.0);
        if groups.contains_key(group) {
            return false;
        }
        groups.insert(group.to_owned(), queue);
        true
    }

    pub(crate) fn remove(&self, group: &str) {
        lock(&self.0).remove(group);
    }

    fn queue(&self, group: &str) -> Option<mpsc::Sender<TransactionCheck>> {
        lock(&self.0).get(group).cloned()
    }
}

/// The handlers of the requests brokers send, for the clients of `config`.
pub(crate) fn dispatcher(table: &ConsumerTable, checks: &TransactionChecks, config: &ClientConfig) -> Dispatcher {
    let mut dispatcher = Dispatcher::new();
    let checks = checks.clone();
    dispatcher.register_sync(request_code::CHECK_TRANSACTION_STATE, move |conn, req| {
        check_transaction_state(&checks, conn, req);
        None
    });
    let consumers = table.clone();
    dispatcher.register_sync(request_code::NOTIFY_CONSUMER_IDS_CHANGED, move |_, req| {
        match req.decode_header::<NotifyConsumerIdsChangedRequestHeader>() {
            Ok(h) => {
                debug!(consumer_group = %h.consumer_group, "consumer ids changed");
                if let Some(trigger) = consumers.trigger(&h.consumer_group) {
                    trigger.notify_one();
                }
            }
            Err(e) => warn!(error = %e, "bad NOTIFY_CONSUMER_IDS_CHANGED header"),
        }
        None
    });
    let consumers = table.clone();
    dispatcher.register(request_code::RESET_CONSUMER_CLIENT_OFFSET, move |conn, req| {
        let consumers = consumers.clone();
        async move {
            reset_offset(&consumers, &conn.remote_addr().to_string(), &req).await;
            None
        }
    });
    let consumers = table.clone();
    let config = config.clone();
    dispatcher.register_sync(request_code::GET_CONSUMER_RUNNING_INFO, move |_, req| {
        Some(consumer_running_info(&consumers, &config, req))
    });
    dispatcher
}

/// CHECK_TRANSACTION_STATE: a oneway question, queued for the producer of the message's
/// group (its `PGROUP`). Nothing is answered here: the producer's worker sends END_TRANSACTION
/// once its listener has decided. When the worker's queue is full the check is dropped; the
/// broker asks again on its next run. Java: `ClientRemotingProcessor#checkTransactionState`
/// and the bounded `checkExecutor` of `DefaultMQProducerImpl`.
fn check_transaction_state(checks: &TransactionChecks, conn: &Connection, req: &RemotingCommand) {
    let remote_addr = conn.remote_addr();
    let header = match req.decode_header::<CheckTransactionStateRequestHeader>() {
        Ok(h) => h,
        Err(e) => {
            warn!(%remote_addr, error = %e, "bad CHECK_TRANSACTION_STATE header");
            return;
        }
    };
    let broker_name = header.broker_name.clone().unwrap_or_default();
    let msg = match decode_checked(&broker_name, &req.body) {
        Ok(msg) => msg,
        Err(e) => {
            warn!(%remote_addr, error = %e, "CHECK_TRANSACTION_STATE message does not decode");
            return;
        }
    };
    let Some(group) = msg.property(keys::PGROUP).map(str::to_owned) else {
        warn!(%remote_addr, topic = %msg.topic(), "checked half message names no producer group");
        return;
    };
    let Some(queue) = checks.queue(&group) else {
        debug!(%remote_addr, producer_group = %group, "transaction check for a group this client does not run");
        return;
    };
    debug!(%remote_addr, producer_group = %group, topic = %msg.topic(), physical_offset = header.commit_log_offset,
        "transaction check queued");
    let check = TransactionCheck { conn: conn.clone(), header, msg };
    match queue.try_send(check) {
        Ok(()) => {}
        Err(mpsc::error::TrySendError::Full(check)) => {
            warn!(%remote_addr, producer_group = %group, physical_offset = check.header.commit_log_offset,
                "transaction check dropped: the check queue is full");
        }
        Err(mpsc::error::TrySendError::Closed(_)) => {
            debug!(%remote_addr, producer_group = %group, "transaction check for a producer shutting down");
        }
    }
}

/// RESET_CONSUMER_CLIENT_OFFSET: a oneway notice, so failures are only logged.
/// Java: `ClientRemotingProcessor#resetOffset`.
async fn reset_offset(consumers: &ConsumerTable, broker_addr: &str, req: &RemotingCommand) {
    let h = match req.decode_header::<ResetOffsetRequestHeader>() {
        Ok(h) => h,
        Err(e) => {
            warn!(remote_addr = broker_addr, error = %e, "bad RESET_CONSUMER_CLIENT_OFFSET header");
            return;
        }
    };
    info!(remote_addr = broker_addr, topic = %h.topic, consumer_group = %h.group, timestamp = h.timestamp,
        "offset reset requested by the broker");
    let offsets = match reset_offsets(&req.body) {
        Ok(offsets) => offsets,
        Err(e) => {
            warn!(remote_addr = broker_addr, topic = %h.topic, consumer_group = %h.group, error = %e,
                "bad RESET_CONSUMER_CLIENT_OFFSET body");
            return;
        }
    };
    match consumers.control(&h.group) {
        Some(control) => control.reset_offset(h.topic, offsets).await,
        None => info!(consumer_group = %h.group, "offset reset for a group this client does not run"),
    }
}

/// The offsets of a reset body: Java's queue-keyed form, or the list form the Java broker
/// sends when the admin tool was a C++ one. No body means no offsets (Java).
fn reset_offsets(body: &[u8]) -> Result<BTreeMap<MessageQueue, i64>, ferromq_protocol::body::BodyError> {
    if body.is_empty() {
        return Ok(BTreeMap::new());
    }
    match ResetOffsetBody::decode(body) {
        Ok(b) => Ok(b.offset_table),
        Err(e) => match ResetOffsetBodyForC::decode(body) {
            Ok(c) => Ok(c
                .offset_table
                .into_iter()
                .map(|q| (MessageQueue::new(q.topic, q.broker_name, q.queue_id), q.offset))
                .collect()),
            Err(_) => Err(e),
        },
    }
}

/// GET_CONSUMER_RUNNING_INFO: the group's running info with the instance's properties, or
/// SYSTEM_ERROR when this client does not run the group.
/// Java: `ClientRemotingProcessor#getConsumerRunningInfo`, `MQClientInstance#consumerRunningInfo`.
fn consumer_running_info(consumers: &ConsumerTable, config: &ClientConfig, req: &RemotingCommand) -> RemotingCommand {
    let h = match req.decode_header::<GetConsumerRunningInfoRequestHeader>() {
        Ok(h) => h,
        Err(e) => return RemotingCommand::response_to(req, response_code::SYSTEM_ERROR, e.to_string()),
    };
    let Some(control) = consumers.control(&h.consumer_group) else {
        let remark = format!("The Consumer Group <{}> not exist in this consumer", h.consumer_group);
        return RemotingCommand::response_to(req, response_code::SYSTEM_ERROR, remark);
    };
    let mut info = control.running_info();
    client_properties(config, &mut info.properties);
    info.properties.insert(PROP_CONSUME_TYPE.to_owned(), control.consume_type().as_str().to_owned());
    if h.jstack_enable == Some(true) {
        info.jstack = Some(control.task_dump());
    }
    info.sort_subscriptions();
    debug!(consumer_group = %h.consumer_group, queues = info.mq_table.len(), "running info reported");
    RemotingCommand::response_to(req, response_code::SUCCESS, None).with_body(info.encode())
}

/// The client settings under Java's `ClientConfig` field names, the name servers as
/// `PROP_NAMESERVER_ADDR` (each followed by `;`) and the client version.
fn client_properties(config: &ClientConfig, props: &mut BTreeMap<String, String>) {
    let namesrv: String = config.namesrv_addrs.iter().map(|a| format!("{a};")).collect();
    let entries = [
        ("namesrvAddr", config.namesrv_addrs.join(";")),
        ("clientIP", config.client_ip.clone()),
        ("instanceName", config.instance_name.clone()),
        ("pollNameServerInterval", config.poll_name_server_interval.as_millis().to_string()),
        ("heartbeatBrokerInterval", config.heartbeat_broker_interval.as_millis().to_string()),
        ("mqClientApiTimeout", config.mq_client_api_timeout.as_millis().to_string()),
        (PROP_NAMESERVER_ADDR, namesrv),
        (PROP_CLIENT_VERSION, CLIENT_VERSION_DESC.to_owned()),
    ];
    props.extend(entries.into_iter().map(|(k, v)| (k.to_owned(), v)));
}

/// Milliseconds since the epoch as Java's `yyyyMMddHHmmss` (the form of a consumer's
/// `consumeTimestamp` setting), in UTC.
pub(crate) fn compact_time(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let rem = secs.rem_euclid(86_400);
    format!("{y:04}{m:02}{d:02}{:02}{:02}{:02}", rem / 3600, rem % 3600 / 60, rem % 60)
}

#[cfg(test)]
mod tests {
    use ferromq_protocol::version;

    use super::*;

    #[test]
    fn version_name_matches_the_reported_version() {
        assert_eq!(version::CURRENT, version::V5_3_3);
        assert_eq!(CLIENT_VERSION_DESC, "V5_3_3");
    }

    #[test]
    fn compact_time_is_java_consume_timestamp_form() {
        assert_eq!(compact_time(1_700_000_000_123), "20231114221320");
        assert_eq!(compact_time(0), "19700101000000");
    }

    #[test]
    fn reset_bodies_read_in_both_forms() {
        let body = ResetOffsetBody { offset_table: BTreeMap::from([(MessageQueue::new("T", "b", 1), 7)]) };
        assert_eq!(reset_offsets(&body.encode()).unwrap(), body.offset_table);
        assert_eq!(reset_offsets(&body.to_c_body().encode()).unwrap(), body.offset_table);
        assert!(reset_offsets(b"").unwrap().is_empty());
        assert!(reset_offsets(b"{\"offsetTable\":7}").is_err());
    }

    #[test]
    fn client_properties_use_java_names() {
        let mut config = ClientConfig::with_namesrv("a:1;b:2");
        config.client_ip = "10.0.0.1".into();
        let mut props = BTreeMap::new();
        client_properties(&config, &mut props);
        assert_eq!(props[PROP_NAMESERVER_ADDR], "a:1;b:2;");
        assert_eq!(props["namesrvAddr"], "a:1;b:2");
        assert_eq!(props["clientIP"], "10.0.0.1");
        assert_eq!(props[PROP_CLIENT_VERSION], "V5_3_3");
        assert_eq!(props["pollNameServerInterval"], "30000");
    }
}
