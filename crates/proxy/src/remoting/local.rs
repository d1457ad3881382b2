//! Requests the proxy's remoting port answers itself (Java: `GetTopicRouteActivity`,
//! `ClientManagerActivity`, `ConsumerManagerActivity`): routes that point every broker at the
//! proxy, client registration, and the membership of consumer groups.
//!
//! Clients registered here are registered with the brokers too: the proxy forwards each
//! client's heartbeat to the masters of its subscribed topics and to every broker it relays a
//! request of that client to, so brokers know the subscriptions (PULL without a subscription
//! of its own) and the producers (transaction check-backs reach the proxy, which relays them).
//! Brokers key clients by connection, and the proxy has one connection per broker, so a group
//! is unregistered from the brokers only when its last client here leaves.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use ferromq_protocol::body::{CheckClientRequestBody, ConsumerListByGroupResponseBody, HeartbeatData, JsonBody};
use ferromq_protocol::header::{
    GetConsumerConnectionListRequestHeader, GetConsumerListByGroupRequestHeader, GetRouteInfoRequestHeader,
    NotifyConsumerIdsChangedRequestHeader, UnregisterClientRequestHeader,
};
use ferromq_protocol::{request_code, response_code, version, RemotingCommand};
use ferromq_remoting::Connection;
use tokio::task::JoinSet;
use tracing::{debug, info};

use super::clients::Departure;
use super::relay::Refusal;
use crate::pb::Code;
use crate::proxy::Proxy;

/// The most a heartbeat waits for the brokers it is forwarded to before the client is answered.
pub const HEARTBEAT_FORWARD_TIMEOUT: Duration = Duration::from_secs(3);

fn success(req: &RemotingCommand) -> RemotingCommand {
    RemotingCommand::response_to(req, response_code::SUCCESS, None)
}

fn failure(req: &RemotingCommand, code: i32, remark: impl Into<String>) -> RemotingCommand {
    RemotingCommand::response_to(req, code, Some(remark.into()))
}

/// The address routes hand to clients: `remotingAccessAddr:remotingListenPort`, or the
/// address the client connected to when `remotingAccessAddr` is empty.
pub fn access_addr(p: &Proxy, conn: &Connection) -> String {
    let host = p.config.remoting_access_addr.trim();
    if !host.is_empty() {
        return format!("{host}:{}", p.config.remoting_listen_port);
    }
    match conn.local_addr() {
        Some(a) => a.to_string(),
        None => format!("127.0.0.1:{}", p.config.remoting_listen_port),
    }
}

/// GET_ROUTEINFO_BY_TOPIC: the name servers' route with every broker address replaced by the
/// proxy's; broker names and queues kept.
pub async fn route(p: &Proxy, conn: &Connection, req: &RemotingCommand) -> RemotingCommand {
    let h: GetRouteInfoRequestHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => return failure(req, response_code::SYSTEM_ERROR, format!("bad GET_ROUTEINFO_BY_TOPIC header: {e}")),
    };
    let route = match p.brokers.route(&h.topic).await {
        Ok(r) => r,
        Err(e) if e.code == Code::TopicNotFound => {
            return failure(
                req,
                response_code::TOPIC_NOT_EXIST,
                format!("No topic route info in name server for the topic: {}", h.topic),
            )
        }
        Err(e) => return failure(req, response_code::SYSTEM_ERROR, e.message),
    };
    let addr = access_addr(p, conn);
    let mut route = (*route).clone();
    for b in &mut route.broker_datas {
        for a in b.broker_addrs.values_mut() {
            a.clone_from(&addr);
        }
    }
    route.filter_server_table.clear();
    let standard = req.version >= version::V4_9_4 || h.accept_standard_json_only.unwrap_or(false);
    success(req).with_body(route.to_json_bytes(standard))
}

/// HEART_BEAT: registers the client here and with the brokers it uses.
pub async fn heartbeat(p: &Arc<Proxy>, conn: &Connection, req: &RemotingCommand) -> RemotingCommand {
    let hb = match HeartbeatData::decode(&req.body) {
        Ok(hb) => hb,
        Err(e) => return failure(req, response_code::SYSTEM_ERROR, format!("malformed heartbeat: {e}")),
    };
    if hb.client_id.trim().is_empty() {
        return failure(req, response_code::SYSTEM_ERROR, "heartbeat without clientID");
    }
    let registered = p.remoting_clients.heartbeat(conn, &hb, req.body.clone(), req.language, req.version);
    for group in &registered.joined_consumer_groups {
        info!(client_id = %hb.client_id, group, client = %conn.remote_addr(), "remoting consumer joined through the proxy");
    }
    // Brokers: the masters of the subscribed topics, and those the client already uses.
    let mut targets: BTreeSet<String> = p.remoting_clients.on_connection(conn).map(|c| c.brokers).unwrap_or_default();
    let topics: BTreeSet<String> =
        hb.consumer_data_set.iter().flat_map(|c| c.subscription_data_set.iter().map(|s| s.topic.clone())).collect();
    for topic in &topics {
        match p.brokers.route(topic).await {
            Ok(route) => targets.extend(route.broker_datas.iter().filter_map(|b| b.master_addr().map(str::to_owned))),
            Err(e) => debug!(topic, error = %e, "no route to forward a subscription to"),
        }
    }
    let refused = forward_heartbeat(p, conn, req, targets).await;
    leave(p, registered.left).await;
    for group in &registered.joined_consumer_groups {
        notify_group(p, group, Some(conn));
    }
    match refused {
        Some(r) => r.answer(req),
        None => success(req),
    }
}

/// Sends the client's heartbeat to `targets` at once, waiting at most
/// [`HEARTBEAT_FORWARD_TIMEOUT`]; a broker's refusal (e.g. an unknown group) is returned so the
/// client sees it, as it would from the broker.
async fn forward_heartbeat(
    p: &Arc<Proxy>,
    conn: &Connection,
    req: &RemotingCommand,
    targets: BTreeSet<String>,
) -> Option<Refusal> {
    let mut calls = JoinSet::new();
    for addr in targets {
        p.remoting_clients.note_broker(conn, &addr);
        let mut forwarded = RemotingCommand::request(request_code::HEART_BEAT).with_body(req.body.clone());
        forwarded.language = req.language;
        forwarded.version = req.version;
        let p = p.clone();
        calls.spawn(async move {
            let result = p.brokers.invoke(&addr, forwarded, Some(HEARTBEAT_FORWARD_TIMEOUT)).await;
            (addr, result)
        });
    }
    let mut refused = None;
    let deadline = tokio::time::Instant::now() + HEARTBEAT_FORWARD_TIMEOUT;
    loop {
        match tokio::time::timeout_at(deadline, calls.join_next()).await {
            Ok(Some(Ok((addr, result)))) => refused = settle_forward(p, conn, &addr, result).or(refused),
            Ok(Some(Err(_))) => {}
            Ok(None) => break,
            Err(_) => {
                // The client is answered now; the calls still out finish in the background (each
                // bounded by its own timeout), so a slow broker still gets the heartbeat, and a
                // failed one is forgotten and sent again before the client's next request there.
                debug!(
                    pending = calls.len(),
                    "forwarding a heartbeat takes longer than {HEARTBEAT_FORWARD_TIMEOUT:?}; answering the client"
                );
                let (p, conn) = (p.clone(), conn.clone());
                tokio::spawn(async move {
                    while let Some(done) = calls.join_next().await {
                        if let Ok((addr, result)) = done {
                            settle_forward(&p, &conn, &addr, result);
                        }
                    }
                });
                break;
            }
        }
    }
    refused
}

/// One forwarded heartbeat's outcome: a broker's refusal to pass on to the client; a failed
/// call makes the broker one the client's heartbeat has not reached.
fn settle_forward(
    p: &Proxy,
    conn: &Connection,
    addr: &str,
    result: crate::status::ProxyResult<RemotingCommand>,
) -> Option<Refusal> {
    match result {
        Ok(resp) if resp.code == response_code::SUCCESS => None,
        Ok(resp) => {
            debug!(broker = %addr, code = resp.code, remark = ?resp.remark, "broker refused a forwarded heartbeat");
            Some(Refusal { code: resp.code, remark: format!("broker {addr}: {}", resp.remark.unwrap_or_default()) })
        }
        Err(e) => {
            // Sent again with the next heartbeat.
            debug!(broker = %addr, error = %e, "forwarding a heartbeat failed");
            p.remoting_clients.forget_broker(conn, addr);
            None
        }
    }
}

/// Before the first request of a client to the broker at `addr`: forwards its heartbeat there.
pub async fn introduce(p: &Arc<Proxy>, conn: &Connection, addr: &str) {
    let Some((body, language, version)) = p.remoting_clients.heartbeat_unknown_to(conn, addr) else { return };
    let mut req = RemotingCommand::request(request_code::HEART_BEAT).with_body(body);
    req.language = language;
    req.version = version;
    forward_heartbeat(p, conn, &req, BTreeSet::from([addr.to_owned()])).await;
}

/// UNREGISTER_CLIENT.
pub async fn unregister(p: &Arc<Proxy>, conn: &Connection, req: &RemotingCommand) -> RemotingCommand {
    let h: UnregisterClientRequestHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => return failure(req, response_code::SYSTEM_ERROR, format!("bad UNREGISTER_CLIENT header: {e}")),
    };
    if let Some(d) =
        p.remoting_clients.unregister(conn, &h.client_id, h.producer_group.as_deref(), h.consumer_group.as_deref())
    {
        leave(p, d).await;
    }
    success(req)
}

/// The connection of a client closed: it leaves every group.
pub async fn closed(p: &Arc<Proxy>, conn: &Connection) {
    if let Some(d) = p.remoting_clients.closed(conn) {
        info!(client_id = %d.client_id, client = %conn.remote_addr(), "remoting client of the proxy disconnected");
        leave(p, d).await;
    }
}

/// A client left groups: brokers forget the groups no client here belongs to any more, and the
/// remaining consumers of its groups rebalance.
async fn leave(p: &Arc<Proxy>, mut d: Departure) {
    // gRPC clients of this proxy reach brokers over the same connections.
    d.last_producer_groups.retain(|g| !p.clients.has_producer_of(g));
    d.last_consumer_groups.retain(|g| !p.clients.has_consumer_of(g));
    let mut headers: Vec<UnregisterClientRequestHeader> = d
        .last_producer_groups
        .iter()
        .map(|g| UnregisterClientRequestHeader {
            client_id: d.client_id.clone(),
            producer_group: Some(g.clone()),
            consumer_group: None,
        })
        .collect();
    headers.extend(d.last_consumer_groups.iter().map(|g| UnregisterClientRequestHeader {
        client_id: d.client_id.clone(),
        producer_group: None,
        consumer_group: Some(g.clone()),
    }));
    for addr in &d.brokers {
        for h in &headers {
            let req = RemotingCommand::request(request_code::UNREGISTER_CLIENT).with_header(h);
            if let Err(e) = p.brokers.invoke(addr, req, None).await {
                debug!(broker = %addr, client_id = %d.client_id, error = %e, "unregistering from a broker failed");
            }
        }
    }
    for group in &d.shared_consumer_groups {
        notify_group(p, group, None);
    }
}

/// NOTIFY_CONSUMER_IDS_CHANGED to the group's consumers here (but `except`), so they rebalance
/// over the new membership (oneway, as brokers send it).
fn notify_group(p: &Proxy, group: &str, except: Option<&Connection>) {
    for c in p.remoting_clients.consumer_connections(group) {
        if except.is_some_and(|e| *e == c) {
            continue;
        }
        let req = RemotingCommand::request(request_code::NOTIFY_CONSUMER_IDS_CHANGED)
            .with_header(&NotifyConsumerIdsChangedRequestHeader { consumer_group: group.to_owned() });
        tokio::spawn(async move {
            if let Err(e) = c.invoke_oneway(req).await {
                debug!(client = %c.remote_addr(), error = %e, "consumer ids change notice not sent");
            }
        });
    }
}

/// GET_CONSUMER_LIST_BY_GROUP: the group's consumers connected to this proxy (the clients
/// that rebalance over the queues the proxy's routes give).
pub fn consumer_list(p: &Proxy, req: &RemotingCommand) -> RemotingCommand {
    let h: GetConsumerListByGroupRequestHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => {
            return failure(req, response_code::SYSTEM_ERROR, format!("bad GET_CONSUMER_LIST_BY_GROUP header: {e}"))
        }
    };
    let ids = p.remoting_clients.consumer_ids(&h.consumer_group);
    if ids.is_empty() {
        return failure(req, response_code::SYSTEM_ERROR, format!("no consumer for this group, {}", h.consumer_group));
    }
    success(req).with_body(ConsumerListByGroupResponseBody { consumer_id_list: ids }.encode())
}

/// GET_CONSUMER_CONNECTION_LIST: the group's members connected to this proxy, remoting and gRPC
/// clients (mqadmin `consumerConnection` pointed at the proxy); CONSUMER_NOT_ONLINE when none is.
pub fn consumer_connection_list(p: &Proxy, req: &RemotingCommand) -> RemotingCommand {
    let h: GetConsumerConnectionListRequestHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => {
            return failure(req, response_code::SYSTEM_ERROR, format!("bad GET_CONSUMER_CONNECTION_LIST header: {e}"))
        }
    };
    match p.consumer_connection(&h.consumer_group) {
        Some(body) => success(req).with_body(body.encode()),
        None => failure(
            req,
            response_code::CONSUMER_NOT_ONLINE,
            format!("the consumer group[{}] not online", h.consumer_group),
        ),
    }
}

/// CHECK_CLIENT_CONFIG: checked by a master of the subscribed topic (the broker validates the
/// filter expression as it would for a direct client).
pub async fn check_client_config(p: &Arc<Proxy>, conn: &Connection, req: RemotingCommand) -> Option<RemotingCommand> {
    let body = match CheckClientRequestBody::decode(&req.body) {
        Ok(b) => b,
        Err(e) => {
            return Some(failure(&req, response_code::SYSTEM_ERROR, format!("malformed CHECK_CLIENT_CONFIG: {e}")))
        }
    };
    let Some(topic) = body.subscription_data.as_ref().map(|s| s.topic.clone()) else {
        return Some(failure(&req, response_code::SYSTEM_ERROR, "CHECK_CLIENT_CONFIG without subscription data"));
    };
    let route = match p.brokers.route(&topic).await {
        Ok(r) => r,
        Err(e) => return Some(failure(&req, response_code::SYSTEM_ERROR, e.message)),
    };
    let Some(addr) = route.broker_datas.iter().find_map(|b| b.master_addr()).map(str::to_owned) else {
        return Some(failure(&req, response_code::SYSTEM_ERROR, format!("no master serves topic {topic}")));
    };
    introduce(p, conn, &addr).await;
    let mut forwarded = req.clone();
    forwarded.flag = 0;
    Some(match p.brokers.invoke(&addr, forwarded, None).await {
        Ok(resp) => resp,
        Err(e) => failure(&req, response_code::SYSTEM_ERROR, format!("broker {addr}: {}", e.message)),
    })
}

/// A request a broker sends to the client `client_id` (GET_CONSUMER_RUNNING_INFO,
/// CONSUME_MESSAGE_DIRECTLY) when that client is connected here: relayed to it. `None` when it
/// is not a remoting client of this proxy.
pub async fn to_client(p: &Proxy, client_id: &str, req: &RemotingCommand) -> Option<RemotingCommand> {
    let conn = p.remoting_clients.connection_of(client_id)?;
    let mut forwarded = req.clone();
    forwarded.flag = 0;
    Some(match conn.invoke(forwarded, crate::admin_relay::CLIENT_ANSWER_TIMEOUT).await {
        Ok(resp) => resp,
        Err(e) => failure(req, response_code::SYSTEM_ERROR, format!("client {client_id} did not answer: {e}")),
    })
}
