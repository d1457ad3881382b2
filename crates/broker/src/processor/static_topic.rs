//! Static topics (RIP-21) on the request path: a request for a static topic names a *logic*
//! queue (its global id) and logic offsets; this file turns it into the physical queue and
//! offsets of the item that holds them, serves it here or forwards it to the broker holding an
//! older item, and turns the answer back into logic terms. Java: `TopicQueueMappingManager`
//! (`buildTopicQueueMappingContext`, `rewriteRequestForStaticTopic`) and the static-topic parts
//! of `SendMessageProcessor`, `PullMessageProcessor`, `ConsumerManageProcessor` and
//! `AdminBrokerProcessor`.
//!
//! Who means logic queues: as in Java, a request with `lo=false` names a physical queue (one
//! broker forwarding to another, or a client that lists queues from the route's `queueDatas`,
//! as FerroMQ's own client, admin tool and proxy do). Java reads every other request as logic,
//! which breaks clients older than 5.0 that know nothing of mappings: their queue ids come from
//! `queueDatas` and are physical. FerroMQ reads a request without `lo` from a client older
//! than V5_0_0 as physical too, and a physical send to a queue no logic queue is written to
//! any more (it moved to another broker) goes to a queue this broker still leads, so it is
//! not stored where no logic reader looks (docs/decisions/0030-static-topics.md).

use std::sync::Arc;
use std::time::Duration;

use ferromq_protocol::body::static_topic::{self, LogicQueueMappingItem, PHYSICAL_QUEUE};
use ferromq_protocol::body::{JsonBody, TopicQueueMappingDetail, TopicRouteData, MASTER_ID};
use ferromq_protocol::header::{
    pull_sys_flag, GetMaxOffsetRequestHeader, GetRouteInfoRequestHeader, OffsetResponseHeader,
    PullMessageRequestHeader, PullMessageResponseHeader, QueryConsumerOffsetRequestHeader, QueueRequestHeader,
    SearchOffsetRequestHeader, UpdateConsumerOffsetRequestHeader,
};
use ferromq_protocol::{request_code, response_code, version, CommandHeader, RemotingCommand};
use ferromq_remoting::Connection;
use tracing::warn;

use crate::broker::Broker;
use crate::processor::failure;
use crate::service::SendRequest;

/// How long a request forwarded to the broker holding an older item may take (Java's
/// `forwardTimeout`).
const FORWARD_TIMEOUT: Duration = Duration::from_secs(3);
/// How long a learnt broker address is trusted before the route is asked again.
const PEER_ADDR_TTL: Duration = Duration::from_secs(30);

/// A logic queue of a static topic this broker leads, as a request named it.
#[derive(Debug, Clone)]
pub(crate) struct LogicQueue {
    pub(crate) detail: Arc<TopicQueueMappingDetail>,
    pub(crate) global_id: i32,
    /// Oldest generation first; the last is this broker's (the leader).
    pub(crate) items: Vec<LogicQueueMappingItem>,
}

impl LogicQueue {
    pub(crate) fn leader(&self) -> &LogicQueueMappingItem {
        self.items.last().expect("a led logic queue has items")
    }
}

/// How a request on a topic addresses its queue.
pub(crate) enum Addressing {
    /// Not a static topic here, or a physical queue (see the module doc).
    Physical,
    /// A logic queue this broker leads.
    Logic(LogicQueue),
    /// A logic queue this broker does not lead: the answer to give.
    NotLeader(String),
}

/// A pull of a logic queue turned physical: what its answer needs to be turned back.
#[derive(Debug, Clone)]
pub(crate) struct PullMapping {
    logic: LogicQueue,
    /// The item read.
    current: LogicQueueMappingItem,
    /// The physical offset asked for.
    physical_offset: i64,
}

impl PullMapping {
    /// Whether the item read is the logic queue's leader (the one still written).
    pub(crate) fn reads_leader(&self) -> bool {
        self.current.gen == self.logic.leader().gen
    }
}

/// The `lo` field of any request header.
fn lo_of(req: &RemotingCommand) -> Option<bool> {
    req.ext_fields.get("lo").map(|v| v.eq_ignore_ascii_case("true"))
}

fn not_leader_remark(topic: &str, queue_id: i32, bname: &str) -> String {
    format!("{topic}-{queue_id} does not exit in request process of current broker {bname}")
}

/// The answer a forwarded request got, as the answer to `req`.
fn relay(req: &RemotingCommand, mut answer: RemotingCommand) -> RemotingCommand {
    answer.opaque = req.opaque;
    answer
}

impl Broker {
    /// How `req` addresses `queue_id` of `topic`. `select_one_when_miss`: a negative queue id
    /// (a send leaving the choice to the broker) picks a logic queue this broker leads.
    pub(crate) fn addressing(
        &self,
        req: &RemotingCommand,
        topic: &str,
        queue_id: i32,
        select_one_when_miss: bool,
    ) -> Addressing {
        if self.mappings().is_empty() {
            return Addressing::Physical;
        }
        let Some(detail) = self.mappings().get(topic) else { return Addressing::Physical };
        let lo = lo_of(req);
        if lo == PHYSICAL_QUEUE || (lo.is_none() && req.version < version::V5_0_0) {
            return Addressing::Physical;
        }
        let global_id = if queue_id < 0 && select_one_when_miss {
            match detail.leader_id_map().keys().next() {
                Some(g) => *g,
                None => return Addressing::NotLeader(not_leader_remark(topic, queue_id, &detail.bname)),
            }
        } else {
            queue_id
        };
        match detail.hosted_queues.get(&global_id) {
            Some(items) if detail.leads(global_id) => {
                Addressing::Logic(LogicQueue { items: items.clone(), detail: detail.clone(), global_id })
            }
            _ => Addressing::NotLeader(not_leader_remark(topic, global_id, &detail.bname)),
        }
    }

    /// The master address of broker `bname`, from the route of `topic` (cached a while).
    async fn peer_addr(&self, topic: &str, bname: &str) -> Option<String> {
        {
            let peers = self.static_topic_peers.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((addr, at)) = peers.get(bname) {
                if at.elapsed() < PEER_ADDR_TTL {
                    return Some(addr.clone());
                }
            }
        }
        let request = RemotingCommand::request(request_code::GET_ROUTEINFO_BY_TOPIC)
            .with_header(&GetRouteInfoRequestHeader { topic: topic.to_owned(), accept_standard_json_only: Some(true) });
        for namesrv in self.config.namesrv_addrs() {
            let Some(answer) = self.call_namesrv(&namesrv, request.clone(), "static topic route lookup").await else {
                continue;
            };
            let Ok(route) = TopicRouteData::decode(&answer.body) else { continue };
            let mut peers = self.static_topic_peers.lock().unwrap_or_else(|e| e.into_inner());
            for data in &route.broker_datas {
                if let Some(addr) = data.broker_addrs.get(&MASTER_ID) {
                    peers.insert(data.broker_name.clone(), (addr.clone(), std::time::Instant::now()));
                }
            }
            if let Some((addr, _)) = peers.get(bname) {
                return Some(addr.clone());
            }
        }
        None
    }

    /// Sends `request` to the master of `bname` (which holds an older item of a logic queue
    /// of `topic`).
    async fn call_peer(&self, topic: &str, bname: &str, request: RemotingCommand) -> Result<RemotingCommand, String> {
        let addr = self
            .peer_addr(topic, bname)
            .await
            .ok_or_else(|| format!("no address of broker {bname} in the route of static topic {topic}"))?;
        let code = request.code;
        match self.namesrv.invoke(&addr, request, FORWARD_TIMEOUT).await {
            Ok(answer) => Ok(answer),
            Err(e) => {
                // The address may be stale (the broker moved): ask the route next time.
                self.static_topic_peers.lock().unwrap_or_else(|e| e.into_inner()).remove(bname);
                warn!(broker = %bname, %addr, request_code = code, error = %e, "static topic forward failed");
                Err(format!("forwarding to broker {bname} ({addr}) failed: {e}"))
            }
        }
    }

    /// A send naming a logic queue goes to its leader item's physical queue (returned, to
    /// answer in logic terms). `Err` is the answer to give.
    pub(crate) fn route_static_send(
        &self,
        req: &RemotingCommand,
        request: &mut SendRequest,
    ) -> Result<Option<LogicQueue>, Box<RemotingCommand>> {
        let queue_id = request.queue_id.unwrap_or(-1);
        match self.addressing(req, &request.topic, queue_id, true) {
            // Physical: checked by the service layer for every sender (`written_static_queue`).
            Addressing::Physical => Ok(None),
            Addressing::Logic(logic) => {
                request.queue_id = Some(logic.leader().queue_id);
                Ok(Some(logic))
            }
            Addressing::NotLeader(remark) => Err(Box::new(failure(req, response_code::NOT_LEADER_FOR_QUEUE, remark))),
        }
    }

    /// A pull of a logic queue: served here (`Ok` with the physical request and how to turn
    /// its answer back) or answered already (`Err`: forwarded, refused).
    pub(crate) async fn route_static_pull(
        &self,
        req: &RemotingCommand,
    ) -> Result<Option<(RemotingCommand, PullMapping)>, RemotingCommand> {
        let Ok(mut h) = req.decode_header::<PullMessageRequestHeader>() else { return Ok(None) };
        let logic = match self.addressing(req, &h.topic, h.queue_id, false) {
            Addressing::Physical => return Ok(None),
            Addressing::NotLeader(remark) => return Err(failure(req, response_code::NOT_LEADER_FOR_QUEUE, remark)),
            Addressing::Logic(logic) => logic,
        };
        let logic_offset = h.queue_offset;
        let Some(item) = static_topic::find_item(&logic.items, logic_offset, true).cloned() else {
            return Err(failure(
                req,
                response_code::SYSTEM_ERROR,
                format!("{}-{}: no item of the logic queue has a decided offset yet", h.topic, logic.global_id),
            ));
        };
        let physical_offset = item.physical_offset(logic_offset);
        h.queue_id = item.queue_id;
        h.queue_offset = physical_offset;
        if item.end_decided() {
            h.max_msg_nums = h.max_msg_nums.min((item.end_offset - item.start_offset) as i32);
        }
        let local = item.bname == logic.detail.bname;
        // A commit riding on the pull is stored here only when it falls in the item read here
        // (Java would store the logic offset under the physical queue).
        if h.sys_flag & pull_sys_flag::COMMIT_OFFSET != 0 {
            match static_topic::find_item(&logic.items, h.commit_offset, true) {
                Some(at) if local && at.gen == item.gen => h.commit_offset = item.physical_offset(h.commit_offset),
                _ => h.sys_flag &= !pull_sys_flag::COMMIT_OFFSET,
            }
        }
        let mapping = PullMapping { current: item.clone(), logic, physical_offset };
        if local {
            let mut physical = req.clone().with_header(&h);
            physical.ext_fields.insert(ferromq_protocol::ext_fields::intern_key("lo"), "false");
            return Ok(Some((physical, mapping)));
        }
        h.sys_flag &= !(pull_sys_flag::SUSPEND | pull_sys_flag::COMMIT_OFFSET);
        h.broker_name = Some(item.bname.clone());
        h.lo = PHYSICAL_QUEUE;
        let forward = RemotingCommand::request(request_code::PULL_MESSAGE).with_header(&h);
        match self.call_peer(&h.topic, &item.bname, forward).await {
            Ok(answer) => Err(relay(req, self.rewrite_pull_answer(&mapping, answer))),
            Err(remark) => Err(failure(req, response_code::SYSTEM_ERROR, remark)),
        }
    }

    /// Turns the answer of a physical pull back into logic terms. Java:
    /// `PullMessageProcessor#rewriteResponseForStaticTopic`.
    pub(crate) fn rewrite_pull_answer(&self, m: &PullMapping, answer: RemotingCommand) -> RemotingCommand {
        use response_code::{PULL_NOT_FOUND, PULL_OFFSET_MOVED, PULL_RETRY_IMMEDIATELY, SUCCESS};
        let code = answer.code;
        if ![SUCCESS, PULL_NOT_FOUND, PULL_RETRY_IMMEDIATELY, PULL_OFFSET_MOVED].contains(&code) {
            return answer;
        }
        let Ok(mut h) = answer.decode_header::<PullMessageResponseHeader>() else { return answer };
        let items = &m.logic.items;
        let leader = m.logic.leader();
        let earliest = static_topic::find_item(items, 0, true).unwrap_or(leader);
        let mut current = m.current.clone();
        let requested = m.physical_offset;
        let (mut next, mut min, mut max, mut new_code) = (h.next_begin_offset, h.min_offset, h.max_offset, code);
        if code != SUCCESS {
            let mut revised = false;
            let move_on = |current: &mut LogicQueueMappingItem, next: &mut i64, min: &mut i64, max: &mut i64| {
                match static_topic::find_next(items, current, true) {
                    Some(n) => {
                        *current = n.clone();
                        *next = n.start_offset;
                        *min = n.start_offset;
                        *max = n.start_offset;
                        PULL_RETRY_IMMEDIATELY
                    }
                    None => PULL_NOT_FOUND,
                }
            };
            if leader.gen == current.gen {
                if requested > max {
                    if code == PULL_OFFSET_MOVED {
                        next = max;
                    }
                } else if requested < min {
                    next = min;
                    new_code = PULL_RETRY_IMMEDIATELY;
                }
            }
            if earliest.gen == current.gen {
                if requested < min {
                    new_code = PULL_OFFSET_MOVED;
                    next = min;
                } else if requested >= max {
                    new_code = move_on(&mut current, &mut next, &mut min, &mut max);
                    revised = new_code == PULL_RETRY_IMMEDIATELY;
                } else {
                    new_code = code;
                }
            }
            if !revised && leader.gen != current.gen && earliest.gen != current.gen {
                if requested < min {
                    next = min;
                    new_code = PULL_RETRY_IMMEDIATELY;
                } else if requested >= max {
                    new_code = move_on(&mut current, &mut next, &mut min, &mut max);
                } else {
                    new_code = code;
                }
            }
        }
        if current.end_decided() && next >= current.end_offset {
            next = current.end_offset;
        }
        h.next_begin_offset = current.static_offset_strictly(next);
        h.min_offset = current.static_offset_strictly(current.start_offset.max(min));
        h.max_offset =
            current.static_offset_strictly(max).max(m.logic.detail.max_offset_from_mapping(m.logic.global_id));
        h.offset_delta = Some(current.offset_delta());
        let mut answer = answer.with_header(&h);
        answer.code = new_code;
        answer
    }

    /// The six offset requests, with static topics' logic queues resolved first.
    pub(crate) async fn offset_request(&self, conn: &Connection, req: &RemotingCommand) -> RemotingCommand {
        let routed = match req.code {
            request_code::QUERY_CONSUMER_OFFSET => self.static_query_offset(req).await,
            request_code::UPDATE_CONSUMER_OFFSET => self.static_update_offset(conn, req).await,
            request_code::GET_MAX_OFFSET => self.static_max_offset(req).await,
            request_code::GET_MIN_OFFSET => self.static_min_offset(req).await,
            request_code::SEARCH_OFFSET_BY_TIMESTAMP => self.static_search_offset(req).await,
            request_code::GET_EARLIEST_MSG_STORETIME => self.static_earliest_time(req).await,
            _ => None,
        };
        if let Some(answer) = routed {
            return answer;
        }
        match req.code {
            request_code::QUERY_CONSUMER_OFFSET => self.query_consumer_offset(req),
            request_code::UPDATE_CONSUMER_OFFSET => self.update_consumer_offset(conn, req),
            request_code::GET_MAX_OFFSET => self.get_max_offset(req),
            request_code::GET_MIN_OFFSET => self.get_min_offset(req),
            request_code::SEARCH_OFFSET_BY_TIMESTAMP => self.search_offset_by_timestamp(req),
            _ => self.get_earliest_msg_storetime(req),
        }
    }

    /// Resolves the logic queue a request names; `Err` is the refusal, `Ok(None)` a physical
    /// request.
    fn logic_of(
        &self,
        req: &RemotingCommand,
        topic: &str,
        queue_id: i32,
    ) -> Result<Option<LogicQueue>, Box<RemotingCommand>> {
        match self.addressing(req, topic, queue_id, false) {
            Addressing::Physical => Ok(None),
            Addressing::Logic(logic) => Ok(Some(logic)),
            Addressing::NotLeader(remark) => Err(Box::new(failure(req, response_code::NOT_LEADER_FOR_QUEUE, remark))),
        }
    }

    /// Runs `local` here when `item` is this broker's, else forwards `forward` to its broker;
    /// the offset answered, or the answer to give.
    async fn offset_at(
        &self,
        req: &RemotingCommand,
        logic: &LogicQueue,
        item: &LogicQueueMappingItem,
        local: impl FnOnce() -> i64,
        forward: RemotingCommand,
    ) -> Result<i64, Box<RemotingCommand>> {
        if item.bname == logic.detail.bname {
            return Ok(local());
        }
        let answer = self
            .call_peer(&logic.detail.topic, &item.bname, forward)
            .await
            .map_err(|remark| Box::new(failure(req, response_code::SYSTEM_ERROR, remark)))?;
        if answer.code != response_code::SUCCESS {
            return Err(Box::new(relay(req, answer)));
        }
        answer.decode_header::<OffsetResponseHeader>().map(|h| h.offset).map_err(|e| {
            Box::new(failure(req, response_code::SYSTEM_ERROR, format!("broker {} answered badly: {e}", item.bname)))
        })
    }

    /// `req` as `physical` names it: answered by `here` when `item` is this broker's, else by
    /// the broker holding it.
    async fn here_or_forwarded<H: CommandHeader>(
        &self,
        req: &RemotingCommand,
        logic: &LogicQueue,
        item: &LogicQueueMappingItem,
        physical: &H,
        here: impl FnOnce(&RemotingCommand) -> RemotingCommand,
    ) -> RemotingCommand {
        if item.bname == logic.detail.bname {
            return here(&req.clone().with_header(physical));
        }
        let request = RemotingCommand::request(req.code).with_header(physical);
        match self.call_peer(&logic.detail.topic, &item.bname, request).await {
            Ok(answer) => relay(req, answer),
            Err(remark) => failure(req, response_code::SYSTEM_ERROR, remark),
        }
    }

    fn offset_answer(req: &RemotingCommand, offset: i64) -> RemotingCommand {
        crate::processor::success(req).with_header(&OffsetResponseHeader { offset })
    }

    /// QUERY_CONSUMER_OFFSET of a logic queue: the newest item holding an offset of the
    /// group, read here or where it lives. Java: `ConsumerManageProcessor`.
    async fn static_query_offset(&self, req: &RemotingCommand) -> Option<RemotingCommand> {
        let h = req.decode_header::<QueryConsumerOffsetRequestHeader>().ok()?;
        let logic = match self.logic_of(req, &h.topic, h.queue_id) {
            Ok(l) => l?,
            Err(answer) => return Some(*answer),
        };
        let leader = logic.leader().clone();
        if logic.items.len() == 1 && leader.logic_offset == 0 {
            // Logic and physical offsets are the same.
            let physical = QueryConsumerOffsetRequestHeader { queue_id: leader.queue_id, lo: PHYSICAL_QUEUE, ..h };
            return Some(self.query_consumer_offset(&req.clone().with_header(&physical)));
        }
        for item in logic.items.iter().rev() {
            let found = if item.bname == logic.detail.bname {
                self.offsets().query_offset(&h.consumer_group, &h.topic, item.queue_id)
            } else {
                let forward = QueryConsumerOffsetRequestHeader {
                    queue_id: item.queue_id,
                    set_zero_if_not_found: Some(false),
                    broker_name: Some(item.bname.clone()),
                    lo: PHYSICAL_QUEUE,
                    ..h.clone()
                };
                let request = RemotingCommand::request(request_code::QUERY_CONSUMER_OFFSET).with_header(&forward);
                let answer = match self.call_peer(&h.topic, &item.bname, request).await {
                    Ok(a) => a,
                    Err(remark) => return Some(failure(req, response_code::SYSTEM_ERROR, remark)),
                };
                match answer.code {
                    response_code::SUCCESS => answer.decode_header::<OffsetResponseHeader>().ok().map(|o| o.offset),
                    response_code::QUERY_NOT_FOUND => None,
                    _ => return Some(relay(req, answer)),
                }
            };
            if let Some(offset) = found.filter(|o| *o >= 0) {
                return Some(Self::offset_answer(req, item.static_offset_strictly(offset)));
            }
        }
        Some(failure(req, response_code::QUERY_NOT_FOUND, "Not found, maybe this group consumer boot first"))
    }

    /// UPDATE_CONSUMER_OFFSET of a logic queue: stored with the item the offset falls in.
    async fn static_update_offset(&self, conn: &Connection, req: &RemotingCommand) -> Option<RemotingCommand> {
        let h = req.decode_header::<UpdateConsumerOffsetRequestHeader>().ok()?;
        let logic = match self.logic_of(req, &h.topic, h.queue_id) {
            Ok(l) => l?,
            Err(answer) => return Some(*answer),
        };
        let item = static_topic::find_item(&logic.items, h.commit_offset, true)?.clone();
        let physical = UpdateConsumerOffsetRequestHeader {
            queue_id: item.queue_id,
            commit_offset: item.physical_offset(h.commit_offset),
            broker_name: Some(item.bname.clone()),
            lo: PHYSICAL_QUEUE,
            ..h.clone()
        };
        let here = |physical: &RemotingCommand| self.update_consumer_offset(conn, physical);
        Some(self.here_or_forwarded(req, &logic, &item, &physical, here).await)
    }

    /// GET_MAX_OFFSET of a logic queue: the end of its newest decided item.
    async fn static_max_offset(&self, req: &RemotingCommand) -> Option<RemotingCommand> {
        let h = req.decode_header::<GetMaxOffsetRequestHeader>().ok()?;
        let logic = match self.logic_of(req, &h.topic, h.queue_id) {
            Ok(l) => l?,
            Err(answer) => return Some(*answer),
        };
        let item = static_topic::find_item(&logic.items, i64::MAX, true)?.clone();
        let forward = GetMaxOffsetRequestHeader {
            queue_id: item.queue_id,
            broker_name: Some(item.bname.clone()),
            lo: PHYSICAL_QUEUE,
            ..h.clone()
        };
        let request = RemotingCommand::request(request_code::GET_MAX_OFFSET).with_header(&forward);
        let local = || self.store.max_offset_in_queue(&h.topic, item.queue_id);
        Some(match self.offset_at(req, &logic, &item, local, request).await {
            Ok(physical) => Self::offset_answer(req, item.static_offset_strictly(physical)),
            Err(answer) => *answer,
        })
    }

    /// GET_MIN_OFFSET of a logic queue: the start of its oldest decided item.
    async fn static_min_offset(&self, req: &RemotingCommand) -> Option<RemotingCommand> {
        let h = req.decode_header::<QueueRequestHeader>().ok()?;
        let logic = match self.logic_of(req, &h.topic, h.queue_id) {
            Ok(l) => l?,
            Err(answer) => return Some(*answer),
        };
        let item = static_topic::find_item(&logic.items, 0, true)?.clone();
        let forward = QueueRequestHeader {
            queue_id: item.queue_id,
            broker_name: Some(item.bname.clone()),
            lo: PHYSICAL_QUEUE,
            ..h.clone()
        };
        let request = RemotingCommand::request(request_code::GET_MIN_OFFSET).with_header(&forward);
        let local = || self.store.min_offset_in_queue(&h.topic, item.queue_id);
        Some(match self.offset_at(req, &logic, &item, local, request).await {
            Ok(physical) => Self::offset_answer(req, item.static_offset_loosely(physical)),
            Err(answer) => *answer,
        })
    }

    /// GET_EARLIEST_MSG_STORETIME of a logic queue: that of its oldest decided item.
    async fn static_earliest_time(&self, req: &RemotingCommand) -> Option<RemotingCommand> {
        let h = req.decode_header::<QueueRequestHeader>().ok()?;
        let logic = match self.logic_of(req, &h.topic, h.queue_id) {
            Ok(l) => l?,
            Err(answer) => return Some(*answer),
        };
        let item = static_topic::find_item(&logic.items, 0, true)?.clone();
        let physical = QueueRequestHeader {
            queue_id: item.queue_id,
            broker_name: Some(item.bname.clone()),
            lo: PHYSICAL_QUEUE,
            ..h.clone()
        };
        let here = |physical: &RemotingCommand| self.get_earliest_msg_storetime(physical);
        Some(self.here_or_forwarded(req, &logic, &item, &physical, here).await)
    }

    /// SEARCH_OFFSET_BY_TIMESTAMP of a logic queue: the first item, oldest first, that has a
    /// message at or after the time.
    async fn static_search_offset(&self, req: &RemotingCommand) -> Option<RemotingCommand> {
        let h = req.decode_header::<SearchOffsetRequestHeader>().ok()?;
        let logic = match self.logic_of(req, &h.topic, h.queue_id) {
            Ok(l) => l?,
            Err(answer) => return Some(*answer),
        };
        let lower = !h.boundary_type.as_deref().is_some_and(|b| b.eq_ignore_ascii_case("upper"));
        let mut offset = -1;
        for item in logic.items.iter().filter(|i| i.logic_offset_decided()) {
            let forward = SearchOffsetRequestHeader {
                queue_id: item.queue_id,
                broker_name: Some(item.bname.clone()),
                lo: PHYSICAL_QUEUE,
                ..h.clone()
            };
            let request = RemotingCommand::request(request_code::SEARCH_OFFSET_BY_TIMESTAMP).with_header(&forward);
            let local = || self.store.offset_in_queue_by_time(&h.topic, item.queue_id, h.timestamp, lower);
            let physical = match self.offset_at(req, &logic, item, local, request).await {
                Ok(p) => p,
                Err(answer) => return Some(*answer),
            };
            // As Java: a local item that found the time ends the search; a remote one's answer
            // counts unless it is past the item's end, and later items may still improve it.
            if item.bname == logic.detail.bname {
                if physical > 0 {
                    offset = item.static_offset_strictly(physical);
                    break;
                }
            } else if physical >= 0 && !(item.end_decided() && physical >= item.end_offset) {
                offset = item.static_offset_strictly(physical);
            }
        }
        Some(Self::offset_answer(req, offset))
    }
}
