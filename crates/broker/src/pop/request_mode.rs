//! Server-side queue assignment. `messageRequestMode.json` says, per topic and group, whether
//! the group PULLs queues or POPs them (and how many clients share a queue);
//! SET_MESSAGE_REQUEST_MODE (401) changes it, GET_ALL_MESSAGE_REQUEST_MODE (402) hands it to
//! slaves, QUERY_ASSIGNMENT (400) tells a client which queues to read and how (Java clients
//! with `clientRebalance=false`, 5.x clients). Java: `QueryAssignmentProcessor`,
//! `MessageRequestModeManager`.

use std::collections::BTreeSet;
use std::time::Duration;

use ferromq_protocol::body::{
    JsonBody, MessageModel, MessageQueue, MessageQueueAssignment, MessageRequestMode, QueryAssignmentRequestBody,
    QueryAssignmentResponseBody, SetMessageRequestModeRequestBody, TopicRouteData,
};
use ferromq_protocol::header::GetRouteInfoRequestHeader;
use ferromq_protocol::pop::RETRY_GROUP_TOPIC_PREFIX;
use ferromq_protocol::{request_code, response_code, RemotingCommand};
use tracing::{info, warn};

use crate::broker::Broker;
use crate::processor::{failure, success};

/// Time allowed for a route lookup at the name servers.
const ROUTE_TIMEOUT: Duration = Duration::from_secs(3);

/// Java's `AllocateMessageQueueAveragely` (`AVG`).
fn allocate_averagely(queues: &[MessageQueue], cids: &[String], cid: &str) -> Vec<MessageQueue> {
    let Some(index) = cids.iter().position(|c| c == cid) else { return Vec::new() };
    let (n, c) = (queues.len(), cids.len());
    if n == 0 {
        return Vec::new();
    }
    let rem = n % c;
    let average = if n <= c {
        1
    } else if rem > 0 && index < rem {
        n / c + 1
    } else {
        n / c
    };
    let start = if rem > 0 && index < rem { index * average } else { index * average + rem };
    let range = average.min(n.saturating_sub(start));
    (0..range).map(|i| queues[(start + i) % n].clone()).collect()
}

/// Java's `AllocateMessageQueueAveragelyByCircle` (`AVG_BY_CIRCLE`).
fn allocate_by_circle(queues: &[MessageQueue], cids: &[String], cid: &str) -> Vec<MessageQueue> {
    let Some(index) = cids.iter().position(|c| c == cid) else { return Vec::new() };
    queues.iter().skip(index).step_by(cids.len()).cloned().collect()
}

fn allocate(strategy: &str, queues: &[MessageQueue], cids: &[String], cid: &str) -> Option<Vec<MessageQueue>> {
    match strategy {
        "AVG" => Some(allocate_averagely(queues, cids, cid)),
        "AVG_BY_CIRCLE" => Some(allocate_by_circle(queues, cids, cid)),
        _ => None,
    }
}

/// The POP assignment of client `cid`: with `share <= 0` or enough sharing to cover every
/// client, one "every queue" queue (-1) per broker; otherwise its own queues plus those of the
/// next `share` clients; with more clients than queues, queue `index % queues`.
fn allocate_pop(
    strategy: &str,
    queues: &[MessageQueue],
    cids: &[String],
    cid: &str,
    share: i32,
) -> Option<BTreeSet<MessageQueue>> {
    if share <= 0 || share as usize >= cids.len().saturating_sub(1) {
        return Some(queues.iter().map(|q| MessageQueue::new(&q.topic, &q.broker_name, -1)).collect());
    }
    let index = cids.iter().position(|c| c == cid)?;
    if cids.len() <= queues.len() {
        let mut out: BTreeSet<MessageQueue> = allocate(strategy, queues, cids, cid)?.into_iter().collect();
        for i in 1..=share as usize {
            let other = &cids[(index + i) % cids.len()];
            out.extend(allocate(strategy, queues, cids, other)?);
        }
        Some(out)
    } else if queues.is_empty() {
        Some(BTreeSet::new())
    } else {
        Some(BTreeSet::from([queues[index % queues.len()].clone()]))
    }
}

impl Broker {
    /// SET_MESSAGE_REQUEST_MODE (401).
    pub(crate) fn set_message_request_mode(&self, req: &RemotingCommand) -> RemotingCommand {
        let body = match SetMessageRequestModeRequestBody::decode(&req.body) {
            Ok(b) => b,
            Err(e) => {
                return failure(req, response_code::SYSTEM_ERROR, format!("bad SetMessageRequestModeRequestBody: {e}"))
            }
        };
        if body.topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) {
            return failure(req, response_code::NO_PERMISSION, "retry topic is not allowed to set mode");
        }
        if self.topics().select(&body.topic).is_none() {
            return failure(req, response_code::TOPIC_NOT_EXIST, format!("topic[{}] not exist", body.topic));
        }
        if !self.groups().contains(&body.consumer_group) {
            return failure(req, response_code::SUBSCRIPTION_GROUP_NOT_EXIST, "subscription group does not exist");
        }
        info!(topic = %body.topic, group = %body.consumer_group, mode = %body.mode, pop_share_queue_num = body.pop_share_queue_num, "message request mode set");
        self.request_modes().set(body);
        success(req)
    }

    /// GET_ALL_MESSAGE_REQUEST_MODE (402).
    pub(crate) fn get_all_message_request_mode(&self, req: &RemotingCommand) -> RemotingCommand {
        success(req).with_body(self.request_modes().snapshot().encode())
    }

    /// QUERY_ASSIGNMENT (400).
    pub(crate) async fn query_assignment(&self, req: &RemotingCommand) -> RemotingCommand {
        let body = match QueryAssignmentRequestBody::decode(&req.body) {
            Ok(b) => b,
            Err(e) => return failure(req, response_code::SYSTEM_ERROR, format!("bad QueryAssignmentRequestBody: {e}")),
        };
        let (mode, share) = match self.request_modes().get(&body.topic, &body.consumer_group) {
            Some(m) => (m.mode, m.pop_share_queue_num),
            None if body.topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) => (MessageRequestMode::Pull, 0),
            None => {
                let mode = MessageRequestMode::from_name(&self.config.default_message_request_mode)
                    .unwrap_or(MessageRequestMode::Pull);
                (mode, self.config.default_pop_share_queue_num)
            }
        };
        let assigned = self.assign(&body, mode, share).await;
        let response = QueryAssignmentResponseBody {
            message_queue_assignments: assigned.map(|queues| {
                queues
                    .into_iter()
                    .map(|q| MessageQueueAssignment { attachments: None, message_queue: q, mode })
                    .collect()
            }),
        };
        success(req).with_body(response.encode())
    }

    async fn assign(
        &self,
        body: &QueryAssignmentRequestBody,
        mode: MessageRequestMode,
        share: i32,
    ) -> Option<BTreeSet<MessageQueue>> {
        let mut queues = self.route_queues(&body.topic).await?;
        queues.sort();
        if body.message_model == MessageModel::Broadcasting || !self.config.server_load_balancer_enable {
            return Some(queues.into_iter().collect());
        }
        let mut cids = self.consumers.client_ids(&body.consumer_group);
        if cids.is_empty() {
            warn!(group = %body.consumer_group, "query assignment: the group has no consumer registered here");
            return None;
        }
        cids.sort();
        match mode {
            MessageRequestMode::Pull => {
                Some(allocate(&body.strategy_name, &queues, &cids, &body.client_id)?.into_iter().collect())
            }
            MessageRequestMode::Pop => allocate_pop(&body.strategy_name, &queues, &cids, &body.client_id, share),
        }
    }

    /// The readable queues of `topic` across its brokers, from the name servers (this
    /// broker's own queues when no name server answers).
    /// A light queue (`enableLmq`) is in no route: it is queue 0 of this broker.
    async fn route_queues(&self, topic: &str) -> Option<Vec<MessageQueue>> {
        if self.topics().options().lmq && ferromq_store::is_lmq(topic) {
            return Some(vec![MessageQueue::new(topic, &self.config.broker_name, ferromq_store::LMQ_QUEUE_ID)]);
        }
        for addr in self.config.namesrv_addrs() {
            let request = RemotingCommand::request(request_code::GET_ROUTEINFO_BY_TOPIC).with_header(
                &GetRouteInfoRequestHeader { topic: topic.to_owned(), accept_standard_json_only: Some(true) },
            );
            match self.namesrv.invoke(&addr, request, ROUTE_TIMEOUT).await {
                Ok(r) if r.code == response_code::SUCCESS => {
                    let Ok(route) = TopicRouteData::decode(&r.body) else { continue };
                    let mut out = Vec::new();
                    for q in &route.queue_datas {
                        if !ferromq_protocol::body::perm::is_readable(q.perm) {
                            continue;
                        }
                        for id in 0..q.read_queue_nums {
                            out.push(MessageQueue::new(topic, &q.broker_name, id));
                        }
                    }
                    return Some(out);
                }
                Ok(r) if r.code == response_code::TOPIC_NOT_EXIST => return None,
                Ok(_) | Err(_) => continue,
            }
        }
        let config = self.topics().select(topic)?;
        Some((0..config.read_queue_nums).map(|id| MessageQueue::new(topic, &self.config.broker_name, id)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queues(n: i32) -> Vec<MessageQueue> {
        (0..n).map(|i| MessageQueue::new("T", "b", i)).collect()
    }

    fn cids(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("c{i}")).collect()
    }

    #[test]
    fn averagely_matches_java() {
        let q = queues(8);
        let c = cids(3);
        let ids = |cid: &str| allocate_averagely(&q, &c, cid).iter().map(|m| m.queue_id).collect::<Vec<_>>();
        assert_eq!(ids("c0"), [0, 1, 2]);
        assert_eq!(ids("c1"), [3, 4, 5]);
        assert_eq!(ids("c2"), [6, 7]);
        assert!(ids("stranger").is_empty());
        let circle = allocate_by_circle(&q, &c, "c1").iter().map(|m| m.queue_id).collect::<Vec<_>>();
        assert_eq!(circle, [1, 4, 7]);
    }

    #[test]
    fn pop_assignment_shares_queues() {
        let q = queues(4);
        let all = allocate_pop("AVG", &q, &cids(2), "c0", 0).unwrap();
        assert_eq!(all, BTreeSet::from([MessageQueue::new("T", "b", -1)]));
        let shared = allocate_pop("AVG", &q, &cids(4), "c0", 1).unwrap();
        assert_eq!(shared.iter().map(|m| m.queue_id).collect::<Vec<_>>(), [0, 1]);
        let crowded = allocate_pop("AVG", &queues(2), &cids(6), "c3", 1).unwrap();
        assert_eq!(crowded.iter().map(|m| m.queue_id).collect::<Vec<_>>(), [1]);
        assert!(allocate_pop("NOPE", &q, &cids(4), "c0", 1).is_none());
    }
}
