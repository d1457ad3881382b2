//! Client management: HEART_BEAT (34), UNREGISTER_CLIENT (35), GET_CONSUMER_LIST_BY_GROUP (38),
//! LOCK_BATCH_MQ (41), UNLOCK_BATCH_MQ (42), CHECK_CLIENT_CONFIG (46). Java: `ClientManageProcessor`,
//! `ConsumerManageProcessor`, `AdminBrokerProcessor#lockBatchMQ`.

use ferromq_protocol::body::{
    perm, CheckClientRequestBody, ConsumerListByGroupResponseBody, HeartbeatData, JsonBody, LockBatchRequestBody,
    LockBatchResponseBody, IS_SUB_CHANGE, IS_SUPPORT_HEART_BEAT_V2,
};
use ferromq_protocol::header::{GetConsumerListByGroupRequestHeader, UnregisterClientRequestHeader};
use ferromq_protocol::{response_code, RemotingCommand};
use ferromq_remoting::Connection;
use tracing::info;

use crate::broker::{now_ms, Broker};
use crate::client::ClientChannelInfo;
use crate::metadata::retry_topic;
use crate::processor::{failure, header_or_fail, success};

/// Java `TopicSysFlag.buildSysFlag(false, true)`: a topic for unit subscribers.
const TOPIC_SYS_FLAG_UNIT_SUB: i32 = 0x2;

impl Broker {
    pub(crate) fn heart_beat(&self, conn: &Connection, req: &RemotingCommand) -> RemotingCommand {
        let hb = match HeartbeatData::decode(&req.body) {
            Ok(hb) => hb,
            Err(e) => return failure(req, response_code::SYSTEM_ERROR, format!("malformed heartbeat: {e}")),
        };
        let info = ClientChannelInfo::new(conn.clone(), hb.client_id.clone(), req.language, req.version, now_ms());
        // Heartbeat V2: a client whose heartbeat carries a fingerprint leaves its subscriptions
        // out (`withoutSub`) while the broker holds that fingerprint for its groups, and sends
        // them again when told IS_SUB_CHANGE. A heartbeat without a fingerprint always hears
        // "changed", as from Java.
        let fingerprint = hb.heartbeat_fingerprint;
        let mut sub_change = fingerprint == 0;
        for consumer in &hb.consumer_data_set {
            // A group without a config (auto-creation off) is not registered (Java skips it).
            let Some(group) = self.groups().find(&consumer.group_name, self.config.auto_create_subscription_group)
            else {
                continue;
            };
            let notify = group.notify_consumer_ids_changed_enable;
            // Every consumer group gets its retry topic on its first heartbeat, with the
            // unit-sub flag for a unit-mode consumer. Its `order` flag follows whether the
            // heartbeat's subscriptions name an ordered topic (the group's own retry topic,
            // once ordered, counts too), set on every full heartbeat as Java does; a heartbeat
            // without subscriptions leaves it as it is.
            let retry = retry_topic(&consumer.group_name);
            let sys_flag = if consumer.unit_mode { TOPIC_SYS_FLAG_UNIT_SUB } else { 0 };
            let perm = perm::PERM_WRITE | perm::PERM_READ;
            let created = if hb.without_sub {
                self.topics().create_topic_in_send_back(&retry, group.retry_queue_nums, perm, sys_flag)
            } else {
                let has_order_sub =
                    consumer.subscription_data_set.iter().any(|s| self.topics().is_order_topic(&s.topic));
                self.topics().create_topic_in_send_back_with_order(
                    &retry,
                    group.retry_queue_nums,
                    perm,
                    has_order_sub,
                    sys_flag,
                )
            };
            match created {
                Ok(ensured) => {
                    self.on_topic_ensured(&ensured);
                }
                Err(e) => return failure(req, response_code::SYSTEM_ERROR, format!("cannot create {retry}: {e}")),
            }
            for sub in &consumer.subscription_data_set {
                self.consumer_filters.register(
                    &sub.topic,
                    &consumer.group_name,
                    &sub.sub_string,
                    &sub.expression_type,
                    sub.sub_version,
                );
            }
            // A 5.x client that left its unchanged subscriptions out keeps the ones registered.
            let changed = if hb.without_sub {
                self.consumers.register_consumer_without_sub(
                    &consumer.group_name,
                    info.clone(),
                    consumer.consume_type,
                    consumer.message_model,
                    consumer.consume_from_where,
                    notify,
                )
            } else {
                self.consumers.register_consumer(
                    &consumer.group_name,
                    info.clone(),
                    consumer.consume_type,
                    consumer.message_model,
                    consumer.consume_from_where,
                    &consumer.subscription_data_set,
                    notify,
                )
            };
            if changed {
                info!(group = %consumer.group_name, client_id = %hb.client_id, "consumer group changed");
            }
            // Another fingerprint than the group's last one means other subscriptions. A group
            // the broker has no fingerprint for (new, or dropped after its members left) but
            // whose subscriptions were left out has none registered: the client is asked for
            // them. Java answers "unchanged" there and the group stays without subscriptions
            // until the client's next rebalance.
            match self.consumers.swap_heartbeat_fingerprint(&consumer.group_name, fingerprint) {
                Some(previous) if previous != fingerprint => sub_change = true,
                None if hb.without_sub => sub_change = true,
                _ => {}
            }
        }
        for producer in &hb.producer_data_set {
            self.producers.register(&producer.group_name, info.clone());
        }
        let mut response = success(req);
        response.ext_fields.insert(IS_SUPPORT_HEART_BEAT_V2.into(), "true");
        response.ext_fields.insert(IS_SUB_CHANGE.into(), if sub_change { "true" } else { "false" });
        response
    }

    /// Whether the broker can serve a consumer's subscription: tag subscriptions always; SQL92
    /// only with `enablePropertyFilter` and an expression that compiles. Java:
    /// `ClientManageProcessor#checkClientConfig`.
    pub(crate) fn check_client_config(&self, req: &RemotingCommand) -> RemotingCommand {
        let body = match CheckClientRequestBody::decode(&req.body) {
            Ok(b) => b,
            Err(e) => return failure(req, response_code::SYSTEM_ERROR, format!("malformed check request: {e}")),
        };
        let Some(sub) = body.subscription_data else { return success(req) };
        if crate::filter::is_tag_type(Some(sub.expression_type.as_str())) {
            return success(req);
        }
        if !self.config.enable_property_filter {
            self.warn_property_filter_off(&body.group, &sub.expression_type);
            return failure(
                req,
                response_code::SYSTEM_ERROR,
                format!("The broker does not support consumer to filter message by {}", sub.expression_type),
            );
        }
        match crate::filter::build(&sub.sub_string, &sub.expression_type, sub.sub_version) {
            Ok(_) => success(req),
            Err(e) => {
                info!(group = %body.group, client_id = %body.client_id, expression = %sub.sub_string, error = %e, "subscription does not compile");
                failure(req, response_code::SUBSCRIPTION_PARSE_FAILED, e)
            }
        }
    }

    pub(crate) fn unregister_client(&self, conn: &Connection, req: &RemotingCommand) -> RemotingCommand {
        let h = header_or_fail!(req, UnregisterClientRequestHeader);
        if let Some(group) = h.producer_group.as_deref().filter(|g| !g.is_empty()) {
            self.producers.unregister(group, conn.id());
        }
        if let Some(group) = h.consumer_group.as_deref().filter(|g| !g.is_empty()) {
            self.consumers.unregister_consumer(group, conn.id());
        }
        success(req)
    }

    pub(crate) fn get_consumer_list_by_group(&self, req: &RemotingCommand) -> RemotingCommand {
        let h = header_or_fail!(req, GetConsumerListByGroupRequestHeader);
        let ids = self.consumers.client_ids(&h.consumer_group);
        if ids.is_empty() {
            return failure(
                req,
                response_code::SYSTEM_ERROR,
                format!("no consumer for this group, {}", h.consumer_group),
            );
        }
        success(req).with_body(ConsumerListByGroupResponseBody { consumer_id_list: ids }.encode())
    }

    pub(crate) fn lock_batch_mq(&self, req: &RemotingCommand) -> RemotingCommand {
        let body = match LockBatchRequestBody::decode(&req.body) {
            Ok(b) => b,
            Err(e) => return failure(req, response_code::SYSTEM_ERROR, format!("malformed lock request: {e}")),
        };
        let locked = self.locks.try_lock_batch(&body.consumer_group, body.mq_set.iter(), &body.client_id, now_ms());
        success(req).with_body(LockBatchResponseBody { lock_ok_mq_set: locked }.encode())
    }

    pub(crate) fn unlock_batch_mq(&self, req: &RemotingCommand) -> RemotingCommand {
        let body = match LockBatchRequestBody::decode(&req.body) {
            Ok(b) => b,
            Err(e) => return failure(req, response_code::SYSTEM_ERROR, format!("malformed unlock request: {e}")),
        };
        self.locks.unlock_batch(&body.consumer_group, body.mq_set.iter(), &body.client_id);
        success(req)
    }
}
