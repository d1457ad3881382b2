//! Broker calls of the consumers: offsets, long-polling pulls and send-back, each sent to the
//! broker Java's client picks for it. Pulls go to the broker id the last answer suggested
//! (`pull_node`), so consumers read from a slave when the master sends them there or the
//! master is gone; offsets are committed to the master, or to a slave while there is none.
//! Java: the consumer parts of `MQClientAPIImpl` and `PullAPIWrapper`, and
//! `RemoteBrokerOffsetStore`.

use std::collections::BTreeSet;
use std::time::Duration;

use ferromq_protocol::body::{
    perm, static_topic, CheckClientRequestBody, ConsumeFromWhere, JsonBody, LockBatchRequestBody,
    LockBatchResponseBody, MessageQueue, SubscriptionData, EXPRESSION_TYPE_TAG, MASTER_ID,
};
use ferromq_protocol::header::{
    pull_sys_flag, ConsumerSendMsgBackRequestHeader, GetMaxOffsetRequestHeader, OffsetResponseHeader,
    PullMessageRequestHeader, PullMessageResponseHeader, QueryConsumerOffsetRequestHeader, SearchOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
};
use ferromq_protocol::{request_code, response_code, RemotingCommand};
use tracing::{debug, error, warn};

use crate::client_instance::{ClientInstance, FoundBroker};
use crate::error::ClientError;
use crate::message_ext::{decode_pulled, MessageExt};
use crate::publish_info::is_logic_queue;
use crate::pull_node::PullNodeTable;

/// The broker calls of one consumer group.
#[derive(Debug)]
pub(crate) struct ConsumerCalls<'a> {
    pub(crate) instance: &'a ClientInstance,
    pub(crate) group: &'a str,
    /// The consumer's pull-from-which-broker table.
    pub(crate) pull_nodes: &'a PullNodeTable,
}

/// What a long-polling pull asks for.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PullParams {
    pub(crate) batch_size: i32,
    pub(crate) broker_suspend_max: Duration,
    pub(crate) timeout: Duration,
    /// The consumed offset to commit along with the pull (push consumers in clustering mode,
    /// once it is above 0); only a master takes it. Java: `commitOffsetEnable` and
    /// `commitOffsetValue` of `DefaultMQPushConsumerImpl#pullMessage`.
    pub(crate) commit_offset: Option<i64>,
}

/// Which broker of a queue's broker name a call goes to.
#[derive(Debug, Clone, Copy)]
enum Target {
    /// The master only. Java: `findBrokerAddressInPublish`.
    Master,
    /// `broker_id`, with the fall-backs of [`crate::client_instance::select_broker`].
    /// Java: `findBrokerAddressInSubscribe`.
    Subscribe { broker_id: i64, only_this_broker: bool },
}

/// The master if there is one, else (`only_this_broker: false`) a slave.
const MASTER_ELSE_SLAVE: Target = Target::Subscribe { broker_id: MASTER_ID, only_this_broker: false };

/// Where an UPDATE_CONSUMER_OFFSET landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Committed {
    /// On the master: the offset is safe.
    ToMaster,
    /// On a slave, because the route has no master: commit it again once the master is
    /// back, or the master keeps its older offset.
    ToSlave,
}

/// The `lo` field of a request about `mq`: absent for a static topic's logic queue (the
/// broker resolves it), `false` for a physical queue from the route's queueDatas.
fn queue_addressing(mq: &MessageQueue) -> Option<bool> {
    if is_logic_queue(mq) {
        None
    } else {
        static_topic::PHYSICAL_QUEUE
    }
}

/// The sys flag of a pull: long polling with the subscription, and the commit offset only
/// when pulling from a master (a slave's consumer offsets are copies of the master's).
/// Java: `PullSysFlag.buildSysFlag` in `DefaultMQPushConsumerImpl#pullMessage` and
/// `clearCommitOffsetFlag` in `PullAPIWrapper#pullKernelImpl`.
fn pull_flags(commit_offset: bool, from_slave: bool) -> i32 {
    let mut flags = pull_sys_flag::SUSPEND | pull_sys_flag::SUBSCRIPTION;
    if commit_offset && !from_slave {
        flags |= pull_sys_flag::COMMIT_OFFSET;
    }
    flags
}

impl ConsumerCalls<'_> {
    fn find(&self, mq: &MessageQueue, target: Target) -> Option<FoundBroker> {
        let broker_name = self.instance.broker_name_of(mq)?;
        match target {
            Target::Master => self.instance.master_addr(&broker_name).map(|addr| FoundBroker { addr, slave: false }),
            Target::Subscribe { broker_id, only_this_broker } => {
                self.instance.find_broker_in_subscribe(&broker_name, broker_id, only_this_broker)
            }
        }
    }

    /// The broker for a call about `mq`: by `target` in the cached route, else by
    /// `after_refresh` in a fresh one.
    async fn broker_for(
        &self,
        mq: &MessageQueue,
        target: Target,
        after_refresh: Target,
    ) -> Result<FoundBroker, ClientError> {
        if let Some(found) = self.find(mq, target) {
            return Ok(found);
        }
        self.instance.refresh_route(&mq.topic).await?;
        self.find(mq, after_refresh)
            .ok_or_else(|| ClientError::BrokerNotFound { topic: mq.topic.clone(), broker_name: mq.broker_name.clone() })
    }

    async fn invoke(
        &self,
        mq: &MessageQueue,
        addr: &str,
        req: RemotingCommand,
        timeout: Duration,
    ) -> Result<RemotingCommand, ClientError> {
        self.instance.remoting().invoke(addr, req, timeout).await.map_err(|source| ClientError::Remoting {
            topic: mq.topic.clone(),
            addr: addr.to_owned(),
            source,
        })
    }

    /// A call with the API timeout to the broker `target` names.
    async fn call_api(
        &self,
        mq: &MessageQueue,
        target: Target,
        after_refresh: Target,
        req: RemotingCommand,
    ) -> Result<(FoundBroker, RemotingCommand), ClientError> {
        let broker = self.broker_for(mq, target, after_refresh).await?;
        let resp = self.invoke(mq, &broker.addr, req, self.instance.config().mq_client_api_timeout).await?;
        Ok((broker, resp))
    }

    /// A call with the API timeout to the master of `mq`'s broker name.
    async fn call_master(
        &self,
        mq: &MessageQueue,
        req: RemotingCommand,
    ) -> Result<(String, RemotingCommand), ClientError> {
        let (broker, resp) = self.call_api(mq, Target::Master, Target::Master, req).await?;
        Ok((broker.addr, resp))
    }

    fn broker_error(mq: &MessageQueue, addr: String, resp: RemotingCommand) -> ClientError {
        ClientError::Broker {
            topic: mq.topic.clone(),
            broker_addr: addr,
            code: resp.code,
            remark: resp.remark.unwrap_or_default(),
        }
    }

    fn offset_of(mq: &MessageQueue, addr: String, resp: RemotingCommand) -> Result<i64, ClientError> {
        if resp.code != response_code::SUCCESS {
            return Err(Self::broker_error(mq, addr, resp));
        }
        resp.decode_header::<OffsetResponseHeader>()
            .map(|h| h.offset)
            .map_err(|source| ClientError::Header { addr, source })
    }

    /// What a rebalance of `topic` starts from: its readable queues, from a fresh route (which
    /// is installed for pulls and sends), and the address of a broker of the topic to ask for
    /// the group's members: a master, else a slave (`None` if the route names no broker).
    /// Java: the inputs of `RebalanceImpl#rebalanceByTopic`, `findBrokerAddrByTopic`.
    pub(crate) async fn rebalance_inputs(
        &self,
        topic: &str,
    ) -> Result<(Vec<MessageQueue>, Option<String>), ClientError> {
        let route = self.instance.fetch_route(topic).await?;
        self.instance.install_route(topic, &route);
        // A static topic is consumed by its logic queues, each read from its leader.
        let logic = crate::publish_info::logic_queues(topic, &route);
        let queues = if !logic.is_empty() {
            logic
        } else {
            route
                .queue_datas
                .iter()
                .filter(|qd| perm::is_readable(qd.perm))
                .flat_map(|qd| (0..qd.read_queue_nums).map(|q| MessageQueue::new(topic, qd.broker_name.clone(), q)))
                .collect()
        };
        let master = route.broker_datas.iter().find_map(|bd| bd.broker_addrs.get(&MASTER_ID).cloned());
        let any = || route.broker_datas.iter().find_map(|bd| bd.broker_addrs.values().next().cloned());
        Ok((queues, master.or_else(any)))
    }

    /// QUERY_CONSUMER_OFFSET of the master (or, when a fresh route has no master, a
    /// slave); `None` on QUERY_NOT_FOUND. Java: `RemoteBrokerOffsetStore#fetchConsumeOffsetFromBroker`.
    pub(crate) async fn query_offset(&self, mq: &MessageQueue) -> Result<Option<i64>, ClientError> {
        let header = QueryConsumerOffsetRequestHeader {
            consumer_group: self.group.to_owned(),
            topic: mq.topic.clone(),
            queue_id: mq.queue_id,
            set_zero_if_not_found: None,
            broker_name: Some(mq.broker_name.clone()),
            lo: queue_addressing(mq),
        };
        let req = RemotingCommand::request(request_code::QUERY_CONSUMER_OFFSET).with_header(&header);
        let only_master = Target::Subscribe { broker_id: MASTER_ID, only_this_broker: true };
        let (broker, resp) = self.call_api(mq, only_master, MASTER_ELSE_SLAVE, req).await?;
        let addr = broker.addr;
        if resp.code == response_code::QUERY_NOT_FOUND {
            return Ok(None);
        }
        Self::offset_of(mq, addr, resp).map(|o| (o >= 0).then_some(o))
    }

    /// UPDATE_CONSUMER_OFFSET to the master, or to a slave while the route has no master.
    /// Java: `RemoteBrokerOffsetStore#updateConsumeOffsetToBroker`.
    pub(crate) async fn update_offset(&self, mq: &MessageQueue, offset: i64) -> Result<Committed, ClientError> {
        let header = UpdateConsumerOffsetRequestHeader {
            consumer_group: self.group.to_owned(),
            topic: mq.topic.clone(),
            queue_id: mq.queue_id,
            commit_offset: offset,
            broker_name: Some(mq.broker_name.clone()),
            lo: queue_addressing(mq),
        };
        let req = RemotingCommand::request(request_code::UPDATE_CONSUMER_OFFSET).with_header(&header);
        let (broker, resp) = self.call_api(mq, MASTER_ELSE_SLAVE, MASTER_ELSE_SLAVE, req).await?;
        if resp.code != response_code::SUCCESS {
            return Err(Self::broker_error(mq, broker.addr, resp));
        }
        Ok(if broker.slave { Committed::ToSlave } else { Committed::ToMaster })
    }

    /// Where a new queue starts: the committed offset, else by `from_where`.
    /// Java: `RebalancePushImpl#computePullFromWhereWithException`.
    pub(crate) async fn start_offset(
        &self,
        mq: &MessageQueue,
        from_where: ConsumeFromWhere,
        timestamp_ms: i64,
    ) -> Result<i64, ClientError> {
        if let Some(offset) = self.query_offset(mq).await? {
            return Ok(offset);
        }
        self.position_offset(mq, from_where, timestamp_ms).await
    }

    /// The offset `from_where` names in the queue (first, last, or by time), ignoring any
    /// committed offset.
    pub(crate) async fn position_offset(
        &self,
        mq: &MessageQueue,
        from_where: ConsumeFromWhere,
        timestamp_ms: i64,
    ) -> Result<i64, ClientError> {
        let req = match from_where {
            ConsumeFromWhere::ConsumeFromFirstOffset => return Ok(0),
            ConsumeFromWhere::ConsumeFromTimestamp => {
                let header = SearchOffsetRequestHeader {
                    topic: mq.topic.clone(),
                    queue_id: mq.queue_id,
                    timestamp: timestamp_ms,
                    boundary_type: None,
                    broker_name: Some(mq.broker_name.clone()),
                    lo: queue_addressing(mq),
                };
                RemotingCommand::request(request_code::SEARCH_OFFSET_BY_TIMESTAMP).with_header(&header)
            }
            _ => {
                let header = GetMaxOffsetRequestHeader {
                    topic: mq.topic.clone(),
                    queue_id: mq.queue_id,
                    committed: None,
                    broker_name: Some(mq.broker_name.clone()),
                    lo: queue_addressing(mq),
                };
                RemotingCommand::request(request_code::GET_MAX_OFFSET).with_header(&header)
            }
        };
        let (addr, resp) = self.call_master(mq, req).await?;
        Self::offset_of(mq, addr, resp)
    }

    /// One PULL_MESSAGE held by the broker; the next offset and the messages matching `sub`.
    /// It goes to the broker the queue's last answer suggested (the master at first), and
    /// the answer's suggestion is kept for the next pull.
    /// Java: `PullAPIWrapper#pullKernelImpl` + `processPullResult`.
    pub(crate) async fn pull(
        &self,
        mq: &MessageQueue,
        offset: i64,
        sub: &SubscriptionData,
        params: PullParams,
    ) -> Result<(i64, Vec<MessageExt>), ClientError> {
        let node = Target::Subscribe { broker_id: self.pull_nodes.node_of(mq), only_this_broker: false };
        let broker = self.broker_for(mq, node, node).await?;
        let header = PullMessageRequestHeader {
            consumer_group: self.group.to_owned(),
            topic: mq.topic.clone(),
            queue_id: mq.queue_id,
            queue_offset: offset,
            max_msg_nums: params.batch_size,
            sys_flag: pull_flags(params.commit_offset.is_some(), broker.slave),
            commit_offset: params.commit_offset.unwrap_or(0),
            suspend_timeout_millis: params.broker_suspend_max.as_millis() as i64,
            subscription: Some(sub.sub_string.clone()),
            sub_version: sub.sub_version,
            expression_type: Some(expression_type(sub).to_owned()),
            broker_name: Some(mq.broker_name.clone()),
            lo: queue_addressing(mq),
            ..Default::default()
        };
        let req = RemotingCommand::request(request_code::PULL_MESSAGE).with_header(&header);
        let addr = broker.addr;
        let resp = self.invoke(mq, &addr, req, params.timeout).await?;
        match resp.code {
            response_code::SUCCESS
            | response_code::PULL_NOT_FOUND
            | response_code::PULL_RETRY_IMMEDIATELY
            | response_code::PULL_OFFSET_MOVED => {}
            _ => return Err(Self::broker_error(mq, addr, resp)),
        }
        let h: PullMessageResponseHeader =
            resp.decode_header().map_err(|source| ClientError::Header { addr: addr.clone(), source })?;
        self.pull_nodes.suggest(mq, h.suggest_which_broker_id);
        if resp.code != response_code::SUCCESS {
            if resp.code == response_code::PULL_OFFSET_MOVED {
                warn!(topic = %mq.topic, queue_id = mq.queue_id, offset, next = h.next_begin_offset, "pull offset moved");
            }
            return Ok((h.next_begin_offset, Vec::new()));
        }
        let mut msgs = decode_pulled(mq, &resp.body).map_err(|e| ClientError::Broker {
            topic: mq.topic.clone(),
            broker_addr: addr.clone(),
            code: response_code::SUCCESS,
            remark: format!("undecodable pull body: {e}"),
        })?;
        // A static topic's logic queue: the records carry the physical queue and offsets; the
        // answer's offsetDelta makes them logic ones. Java: `PullAPIWrapper#processPullResult`.
        if let Some(delta) = h.offset_delta.filter(|_| is_logic_queue(mq)) {
            for m in &mut msgs {
                m.stored.queue_offset += delta;
                m.stored.queue_id = mq.queue_id;
            }
        }
        // Tag codes collide, so tag subscriptions are checked again by the tag itself; the
        // broker's SQL92 verdict is final. Java: `PullAPIWrapper#processPullResult`.
        if sub.is_tag_type() && !sub.tags_set.is_empty() && !sub.class_filter_mode {
            msgs.retain(|m| m.tags().is_some_and(|t| sub.tags_set.contains(t)));
        }
        Ok((h.next_begin_offset, msgs))
    }

    /// CONSUMER_SEND_MSG_BACK of a message whose consumption failed: the broker stores it in
    /// the group's retry topic, or its dead-letter topic after `max_reconsume_times`.
    /// Java: `MQClientAPIImpl#consumerSendMessageBack`.
    /// A negative `delay_level` sends the message straight to the dead-letter topic.
    pub(crate) async fn send_back(
        &self,
        msg: &MessageExt,
        max_reconsume_times: i32,
        delay_level: i32,
    ) -> Result<(), ClientError> {
        let header = ConsumerSendMsgBackRequestHeader {
            offset: msg.stored.physical_offset,
            group: self.group.to_owned(),
            delay_level,
            origin_msg_id: Some(msg.msg_id()),
            origin_topic: Some(msg.topic().to_owned()),
            unit_mode: Some(false),
            max_reconsume_times: Some(max_reconsume_times),
            broker_name: Some(msg.message_queue.broker_name.clone()),
        };
        let req = RemotingCommand::request(request_code::CONSUMER_SEND_MSG_BACK).with_header(&header);
        let (addr, resp) = self.call_master(&msg.message_queue, req).await?;
        if resp.code != response_code::SUCCESS {
            return Err(Self::broker_error(&msg.message_queue, addr, resp));
        }
        Ok(())
    }
}

impl ConsumerCalls<'_> {
    /// CHECK_CLIENT_CONFIG of a non-tag subscription with a master broker of its topic: a
    /// broker that cannot evaluate the expression (no `enablePropertyFilter`, or the
    /// expression does not compile) refuses it, so the consumer fails to start instead of
    /// pulling in vain. Tag subscriptions and topics without a route are not checked. A broker
    /// that does not serve the request is let through with a warning: its pulls will tell.
    /// Java: `MQClientInstance#checkClientInBroker`, `MQClientAPIImpl#checkClientInBroker`.
    pub(crate) async fn check_client_config(&self, sub: &SubscriptionData) -> Result<(), ClientError> {
        if sub.is_tag_type() {
            return Ok(());
        }
        let addr = match self.rebalance_inputs(&sub.topic).await {
            Ok((_, Some(addr))) => addr,
            Ok((_, None)) | Err(ClientError::RouteNotFound { .. }) => return Ok(()),
            Err(e) => return Err(e),
        };
        let body = CheckClientRequestBody {
            client_id: self.instance.client_id().to_owned(),
            group: self.group.to_owned(),
            subscription_data: Some(sub.clone()),
            namespace: None,
        };
        let req = RemotingCommand::request(request_code::CHECK_CLIENT_CONFIG).with_body(body.encode());
        let resp = self
            .instance
            .remoting()
            .invoke(&addr, req, self.instance.config().mq_client_api_timeout)
            .await
            .map_err(|source| ClientError::Remoting { topic: sub.topic.clone(), addr: addr.clone(), source })?;
        match resp.code {
            response_code::SUCCESS => Ok(()),
            response_code::REQUEST_CODE_NOT_SUPPORTED => {
                warn!(topic = %sub.topic, consumer_group = self.group, remote_addr = %addr,
                    expression_type = %sub.expression_type, "the broker cannot check the subscription; pulls will show whether it filters by it");
                Ok(())
            }
            _ => Err(ClientError::Broker {
                topic: sub.topic.clone(),
                broker_addr: addr,
                code: resp.code,
                remark: resp.remark.unwrap_or_default(),
            }),
        }
    }

    fn lock_request(&self, code: i32, mqs: &BTreeSet<MessageQueue>) -> RemotingCommand {
        let body = LockBatchRequestBody {
            client_id: self.instance.client_id().to_owned(),
            consumer_group: self.group.to_owned(),
            mq_set: mqs.clone(),
            only_this_broker: false,
        };
        RemotingCommand::request(code).with_body(body.encode())
    }

    /// LOCK_BATCH_MQ of queues of one broker; the queues now locked by this client.
    /// Java: `MQClientAPIImpl#lockBatchMQ`.
    pub(crate) async fn lock_batch(&self, mqs: &BTreeSet<MessageQueue>) -> Result<BTreeSet<MessageQueue>, ClientError> {
        let Some(first) = mqs.first() else { return Ok(BTreeSet::new()) };
        let req = self.lock_request(request_code::LOCK_BATCH_MQ, mqs);
        let (addr, resp) = self.call_master(first, req).await?;
        if resp.code != response_code::SUCCESS {
            return Err(Self::broker_error(first, addr, resp));
        }
        LockBatchResponseBody::decode(&resp.body)
            .map(|b| b.lock_ok_mq_set)
            .map_err(|source| ClientError::Body { addr, source })
    }

    /// UNLOCK_BATCH_MQ of queues of one broker. Java: `MQClientAPIImpl#unlockBatchMQ`.
    pub(crate) async fn unlock_batch(&self, mqs: &BTreeSet<MessageQueue>) -> Result<(), ClientError> {
        let Some(first) = mqs.first() else { return Ok(()) };
        let req = self.lock_request(request_code::UNLOCK_BATCH_MQ, mqs);
        let (addr, resp) = self.call_master(first, req).await?;
        if resp.code != response_code::SUCCESS {
            return Err(Self::broker_error(first, addr, resp));
        }
        Ok(())
    }
}

/// The expression type a pull names: the subscription's, `TAG` when it has none.
fn expression_type(sub: &SubscriptionData) -> &str {
    if sub.expression_type.is_empty() {
        EXPRESSION_TYPE_TAG
    } else {
        &sub.expression_type
    }
}

/// Consecutive failed pulls of a queue between two full log lines; the others are logged at
/// debug, so a broker refusing every pull leaves one line per queue and about half a minute.
const PULL_FAILURE_LOG_EVERY: u32 = 30;

/// Logs the `failures`-th failed pull in a row of a queue (from 1), with a cause operators can
/// act on where the broker gives one. The pull loop waits before the next pull either way,
/// as Java's pull callback does (`executePullRequestLater`).
pub(crate) fn log_pull_failure(mq: &MessageQueue, offset: i64, sub: &SubscriptionData, e: &ClientError, failures: u32) {
    if failures % PULL_FAILURE_LOG_EVERY != 1 {
        debug!(topic = %mq.topic, queue_id = mq.queue_id, offset, failures, error = %e, "pull failed again");
        return;
    }
    let code = match e {
        ClientError::Broker { code, .. } => Some(*code),
        _ => None,
    };
    match code {
        Some(response_code::SYSTEM_ERROR) if !sub.is_tag_type() => {
            error!(topic = %mq.topic, queue_id = mq.queue_id, expression_type = %sub.expression_type, failures, error = %e,
                "pull refused: the broker does not filter by this expression type (is enablePropertyFilter off?)");
        }
        Some(response_code::SUBSCRIPTION_PARSE_FAILED) => {
            error!(topic = %mq.topic, queue_id = mq.queue_id, expression_type = %sub.expression_type, failures, error = %e,
                "pull refused: the broker cannot parse the subscription expression");
        }
        Some(
            response_code::FILTER_DATA_NOT_EXIST
            | response_code::FILTER_DATA_NOT_LATEST
            | response_code::SUBSCRIPTION_NOT_EXIST
            | response_code::SUBSCRIPTION_NOT_LATEST,
        ) => {
            warn!(topic = %mq.topic, queue_id = mq.queue_id, failures, error = %e,
                "pull refused: the broker does not have the latest subscription yet, retrying later");
        }
        _ => warn!(topic = %mq.topic, queue_id = mq.queue_id, offset, failures, error = %e, "pull failed"),
    }
}

/// Prefix of a group's retry topic. Java: `MixAll.RETRY_GROUP_TOPIC_PREFIX`.
pub(crate) const RETRY_PREFIX: &str = "%RETRY%";

/// The retry topic of `group`. Java: `MixAll#getRetryTopic`.
pub(crate) fn retry_topic(group: &str) -> String {
    format!("{RETRY_PREFIX}{group}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pulls_from_a_slave_never_carry_the_commit_offset_flag() {
        let base = pull_sys_flag::SUSPEND | pull_sys_flag::SUBSCRIPTION;
        assert_eq!(pull_flags(true, false), base | pull_sys_flag::COMMIT_OFFSET);
        assert_eq!(pull_flags(true, true), base, "Java clears the flag when the broker found is a slave");
        assert_eq!(pull_flags(false, false), base);
        assert_eq!(pull_flags(false, true), base);
    }
}
