//! Which (resource, actions) a remoting request needs under ACL 2.0 (acl-and-tls.md 3.5; Java:
//! `DefaultAuthorizationContextBuilder`): the explicit cases, then the `@RocketMQAction` /
//! `@RocketMQResource` annotations of 5.3's header classes (the table below), then FerroMQ's
//! additions for requests Java leaves open (docs/decisions/0019).

use ferromq_protocol::body::{
    BatchAckMessageRequestBody, CreateTopicListRequestBody, HeartbeatData, JsonBody, LockBatchRequestBody,
    SubscriptionGroupConfig, SubscriptionGroupList,
};
use ferromq_protocol::{request_code, RemotingCommand};

use super::model::{is_retry_topic, Action, Resource};

/// One thing a request needs: the resource and the actions, any one of which suffices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Needed {
    /// A literal resource.
    pub resource: Resource,
    /// The actions; an entry allowing one of them covers the request.
    pub actions: Vec<Action>,
}

/// Resource kinds of the annotation table.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Topic,
    Group,
    Cluster,
}

/// A header class's `@RocketMQAction`: code, actions, and its `@RocketMQResource` fields (ext
/// field name, kind, splitter). Java's class-level resource (Cluster or none) is not kept: a
/// request naming none of its fields is checked against the cluster either way (see `needed`).
struct Annotated {
    code: i32,
    actions: &'static [Action],
    fields: &'static [(&'static str, Kind, Option<char>)],
}

use Action::{Create, Delete, Get, Pub, Sub, Update};

const fn a(code: i32, actions: &'static [Action], fields: &'static [(&'static str, Kind, Option<char>)]) -> Annotated {
    Annotated { code, actions, fields }
}

const T: Kind = Kind::Topic;
const G: Kind = Kind::Group;
const C: Kind = Kind::Cluster;

/// Java 5.3's annotated headers (the request header of each code), read from the header
/// classes of apache/rocketmq's `remoting` module. Codes with explicit cases above are left out.
const ANNOTATED: &[Annotated] = &[
    a(17, &[Create], &[("topic", T, None)]),
    a(29, &[Get], &[("topic", T, None)]),
    a(30, &[Get], &[("topic", T, None)]),
    a(31, &[Get], &[("topic", T, None)]),
    a(32, &[Get], &[("topic", T, None)]),
    a(33, &[Get], &[("topic", T, None)]),
    a(39, &[Pub], &[("topic", T, None)]),
    a(40, &[Sub], &[("consumerGroup", G, None)]),
    a(100, &[Update], &[]),
    a(101, &[Get], &[]),
    a(102, &[Update], &[]),
    a(103, &[Update], &[("clusterName", C, None)]),
    a(104, &[Update], &[("clusterName", C, None)]),
    a(202, &[Get], &[("topic", T, None)]),
    a(203, &[Get], &[("consumerGroup", G, None)]),
    a(204, &[Get], &[]),
    a(205, &[Update], &[]),
    a(207, &[Delete], &[("groupName", G, None)]),
    a(208, &[Get], &[("consumerGroup", G, None), ("topic", T, None), ("topicList", T, None)]),
    a(215, &[Delete], &[("topic", T, None)]),
    a(216, &[Update], &[("clusterName", C, None)]),
    a(217, &[Update], &[]),
    a(219, &[Get], &[]),
    a(222, &[Update], &[("group", G, None), ("topic", T, None)]),
    a(223, &[Get], &[("topic", T, None), ("group", G, None)]),
    a(300, &[Get], &[("topic", T, None)]),
    a(303, &[Get], &[("topic", T, None), ("group", G, None)]),
    a(307, &[Get], &[("consumerGroup", G, None)]),
    a(308, &[Get], &[("filterGroups", G, Some(',')), ("compareGroup", G, None), ("topic", T, None)]),
    a(309, &[Sub], &[("consumerGroup", G, None), ("topic", T, None)]),
    a(314, &[Update], &[("destGroup", G, None), ("topic", T, None)]),
    a(315, &[Get], &[]),
    a(317, &[Get], &[]),
    a(321, &[Get], &[("topic", T, None), ("consumerGroup", G, None)]),
    a(322, &[Get], &[("clusterName", C, None)]),
    a(323, &[Update], &[("topic", T, None)]),
    a(326, &[Sub], &[("producerGroup", G, None), ("topic", T, None)]),
    a(327, &[Update], &[]),
    a(328, &[Get], &[]),
    a(343, &[Get], &[("group", G, None)]),
    a(345, &[Get], &[("group", G, None), ("topic", T, None)]),
    a(351, &[Get], &[("topic", T, None)]),
    a(352, &[Get], &[("group", G, None)]),
    a(353, &[Update], &[("group", G, None), ("topic", T, None)]),
    a(354, &[Get], &[("topic", T, None)]),
    a(355, &[Get], &[]),
    a(901, &[Get], &[("clusterName", C, None)]),
    a(902, &[Update], &[]),
    a(903, &[Update], &[("brokerClusterName", C, None)]),
    a(904, &[Update], &[("clusterName", C, None)]),
    a(905, &[Update], &[]),
    a(906, &[Update], &[]),
    a(908, &[Update], &[]),
    a(1001, &[Update], &[]),
    a(1002, &[Update], &[("clusterName", C, None)]),
    a(1003, &[Update], &[("clusterName", C, None)]),
    a(1004, &[Get], &[]),
    a(1008, &[Update], &[]),
    a(1011, &[Update], &[("clusterName", C, None)]),
    a(1012, &[Get], &[("clusterName", C, None)]),
    a(1013, &[Update], &[("clusterName", C, None)]),
    a(3001, &[Update], &[]),
    a(3002, &[Update], &[]),
    a(3003, &[Update], &[]),
    a(3004, &[Get], &[]),
    a(3005, &[Get], &[]),
    a(3006, &[Update], &[]),
    a(3007, &[Update], &[]),
    a(3008, &[Update], &[]),
    a(3009, &[Get], &[]),
    a(3010, &[Get], &[]),
    a(200050, &[Sub], &[("consumerGroup", G, None), ("topic", T, None)]),
    a(200051, &[Sub], &[("consumerGroup", G, None), ("topic", T, None)]),
    a(200052, &[Sub], &[("topic", T, None), ("consumerGroup", G, None)]),
    a(200053, &[Sub], &[("consumerGroup", G, None), ("topic", T, None)]),
    a(200054, &[Sub], &[("consumerGroup", G, None), ("topic", T, None)]),
    a(200055, &[Get], &[("consumerGroup", G, None), ("topic", T, None)]),
];

/// Operator requests without an annotation in Java 5.3 (so open to any authenticated user
/// there): FerroMQ asks for `Cluster:<cluster>` with this action.
const CLUSTER_OPERATIONS: &[(i32, Action)] = &[
    (request_code::UPDATE_BROKER_CONFIG, Update),
    (request_code::GET_BROKER_CONFIG, Get),
    (request_code::CLEAN_EXPIRED_CONSUMEQUEUE, Update),
    (request_code::CLEAN_UNUSED_TOPIC, Update),
    (request_code::DELETE_EXPIRED_COMMITLOG, Update),
    (request_code::UPDATE_AND_CREATE_ACL_CONFIG, Update),
    (request_code::DELETE_ACL_CONFIG, Update),
    (request_code::GET_BROKER_CLUSTER_ACL_INFO, Get),
    (request_code::UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, Update),
    (request_code::GET_BROKER_CLUSTER_ACL_CONFIG, Get),
    (request_code::UPDATE_COLD_DATA_FLOW_CTR_CONFIG, Update),
    (request_code::REMOVE_COLD_DATA_FLOW_CTR_CONFIG, Update),
    (request_code::UPDATE_AND_CREATE_STATIC_TOPIC, Update),
    (request_code::UPDATE_NAMESRV_CONFIG, Update),
];

fn ctx(resource: Resource, actions: &[Action]) -> Needed {
    Needed { resource, actions: actions.to_vec() }
}

/// What `request` needs; empty when it needs no authorization.
///
/// # Errors
/// A body that the decision needs and that does not parse ("parse authorization context
/// error." in Java).
pub fn needed(request: &RemotingCommand, cluster: &str) -> Result<Vec<Needed>, String> {
    use request_code::*;
    let ext = |k: &str| request.ext(k).filter(|v| !v.trim().is_empty());
    let mut out = Vec::new();
    let body_err =
        |what: &str, e: &dyn std::fmt::Display| format!("parse authorization context error: {what} body: {e}");
    match request.code {
        GET_ROUTEINFO_BY_TOPIC => {
            if let Some(t) = ext("topic") {
                if is_retry_topic(t) {
                    out.push(ctx(Resource::group(t), &[Sub, Get]));
                } else {
                    out.push(ctx(Resource::topic(t), &[Pub, Sub, Get]));
                }
            }
        }
        SEND_MESSAGE | SEND_REPLY_MESSAGE | RECALL_MESSAGE => send_to(&mut out, ext("topic")),
        SEND_MESSAGE_V2 | SEND_BATCH_MESSAGE | SEND_REPLY_MESSAGE_V2 => send_to(&mut out, ext("b")),
        END_TRANSACTION => {
            if let Some(t) = ext("topic") {
                out.push(ctx(Resource::topic(t), &[Pub]));
            }
        }
        CONSUMER_SEND_MSG_BACK => {
            if let Some(g) = ext("group") {
                out.push(ctx(Resource::group(g), &[Sub]));
            }
        }
        PULL_MESSAGE | LITE_PULL_MESSAGE => {
            if let Some(t) = ext("topic").filter(|t| !is_retry_topic(t)) {
                out.push(ctx(Resource::topic(t), &[Sub]));
            }
            if let Some(g) = ext("consumerGroup") {
                out.push(ctx(Resource::group(g), &[Sub]));
            }
        }
        QUERY_MESSAGE => {
            if let Some(t) = ext("topic") {
                out.push(ctx(Resource::topic(t), &[Sub, Get]));
            }
        }
        HEART_BEAT => {
            let hb = HeartbeatData::decode(&request.body).map_err(|e| body_err("heartbeat", &e))?;
            for c in &hb.consumer_data_set {
                out.push(ctx(Resource::group(&c.group_name), &[Sub]));
                for s in c.subscription_data_set.iter().filter(|s| !is_retry_topic(&s.topic)) {
                    out.push(ctx(Resource::topic(&s.topic), &[Sub]));
                }
            }
        }
        UNREGISTER_CLIENT => {
            if let Some(g) = ext("consumerGroup") {
                out.push(ctx(Resource::group(g), &[Sub]));
            }
        }
        GET_CONSUMER_LIST_BY_GROUP => {
            if let Some(g) = ext("consumerGroup") {
                out.push(ctx(Resource::group(g), &[Sub, Get]));
            }
        }
        QUERY_CONSUMER_OFFSET | UPDATE_CONSUMER_OFFSET => {
            let actions: &[Action] = if request.code == QUERY_CONSUMER_OFFSET { &[Sub, Get] } else { &[Sub, Update] };
            if let Some(t) = ext("topic").filter(|t| !is_retry_topic(t)) {
                out.push(ctx(Resource::topic(t), actions));
            }
            if let Some(g) = ext("consumerGroup") {
                out.push(ctx(Resource::group(g), actions));
            }
        }
        LOCK_BATCH_MQ | UNLOCK_BATCH_MQ => {
            let body = LockBatchRequestBody::decode(&request.body).map_err(|e| body_err("lock batch", &e))?;
            out.push(ctx(Resource::group(&body.consumer_group), &[Sub]));
            for mq in body.mq_set.iter().filter(|mq| !is_retry_topic(&mq.topic)) {
                out.push(ctx(Resource::topic(&mq.topic), &[Sub]));
            }
        }
        UPDATE_AND_CREATE_TOPIC_LIST => {
            let body = CreateTopicListRequestBody::decode(&request.body).map_err(|e| body_err("topic list", &e))?;
            for t in &body.topic_config_list {
                out.push(ctx(Resource::topic(&t.topic_name), &[Create]));
            }
        }
        BATCH_ACK_MESSAGE => {
            // Java checks nothing here (no header to annotate): each acknowledgement is a
            // consumer's, on its group and the original topic it names.
            let body = BatchAckMessageRequestBody::decode(&request.body).map_err(|e| body_err("batch ack", &e))?;
            for ack in &body.acks {
                out.push(ctx(Resource::group(&ack.consumer_group), &[Sub]));
                if !ack.topic.is_empty() {
                    out.push(ctx(Resource::topic_or_group(&ack.topic), &[Sub]));
                }
            }
        }
        UPDATE_AND_CREATE_SUBSCRIPTIONGROUP => {
            let body =
                SubscriptionGroupConfig::decode(&request.body).map_err(|e| body_err("subscription group", &e))?;
            out.push(ctx(Resource::group(&body.group_name), &[Create]));
        }
        UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST => {
            let body =
                SubscriptionGroupList::decode(&request.body).map_err(|e| body_err("subscription group list", &e))?;
            for g in &body.group_config_list {
                out.push(ctx(Resource::group(&g.group_name), &[Create]));
            }
        }
        code => {
            if let Some(ann) = ANNOTATED.iter().find(|a| a.code == code) {
                for (field, kind, splitter) in ann.fields {
                    let Some(value) = ext(field) else { continue };
                    let values: Vec<&str> = match splitter {
                        Some(c) => value.split(*c).map(str::trim).filter(|v| !v.is_empty()).collect(),
                        None => vec![value],
                    };
                    for v in values {
                        let resource = match kind {
                            Kind::Topic => Resource::topic_or_group(v),
                            Kind::Group => Resource::group(v),
                            Kind::Cluster => Resource::cluster(v),
                        };
                        out.push(ctx(resource, ann.actions));
                    }
                }
                // Java checks nothing when a request names none of its resources (a 4.x
                // VIEW_MESSAGE_BY_ID has only an offset, so any message could be read): the
                // cluster stands in for what the request does not name.
                if out.is_empty() {
                    out.push(ctx(Resource::cluster(cluster), ann.actions));
                }
            } else if let Some((_, action)) = CLUSTER_OPERATIONS.iter().find(|(c, _)| *c == code) {
                out.push(ctx(Resource::cluster(cluster), &[*action]));
            }
        }
    }
    Ok(out)
}

/// A send to a retry topic is a consumer's matter: SUB on the retry topic's group (Java uses
/// the producer group when one is given, which for a consumer's fallback send-back is the
/// client's inner producer group, unrelated to the retry topic).
fn send_to(out: &mut Vec<Needed>, topic: Option<&str>) {
    match topic {
        Some(t) if is_retry_topic(t) => out.push(ctx(Resource::group(t), &[Sub])),
        Some(t) => out.push(ctx(Resource::topic(t), &[Pub])),
        None => {}
    }
}
