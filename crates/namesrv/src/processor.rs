//! The name server's request processors: decode a request, act on the route table or the KV
//! table, build the response. Java: `DefaultRequestProcessor`, `ClientRequestProcessor`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use ferromq_config::RocketMqConfig;
use ferromq_protocol::body::{
    DataVersion, GetBrokerMemberGroupResponseBody, JsonBody, KVTable, RegisterBrokerBody, TopicRouteData,
};
use ferromq_protocol::header::*;
use ferromq_protocol::message::crc32_masked;
use ferromq_protocol::{json, properties_text, request_code, response_code, version, RemotingCommand};
use ferromq_remoting::{Connection, ConnectionId, Dispatcher};
use tracing::{info, warn};

use crate::config::NamesrvConfig;
use crate::kv_config::{KvConfig, NAMESPACE_ORDER_TOPIC_CONFIG};
use crate::route_table::{BrokerAddrInfo, BrokerRegistration, RouteTable, MASTER_ID};

/// Topic sysflag bit: a unit topic.
const TOPIC_SYS_FLAG_UNIT: i32 = 0x1;
/// Topic sysflag bit: a topic with unit subscriptions.
const TOPIC_SYS_FLAG_UNIT_SUB: i32 = 0x2;

/// Shared state of a running name server.
#[derive(Debug)]
pub struct NamesrvState {
    pub(crate) config: RwLock<NamesrvConfig>,
    pub(crate) routes: RwLock<RouteTable>,
    pub(crate) kv: Mutex<KvConfig>,
    /// Connections brokers registered on, so an expired broker's connection can be closed.
    pub(crate) broker_connections: Mutex<HashMap<ConnectionId, Connection>>,
}

pub(crate) fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

// Locks are only poisoned if a processor panicked mid-update; the tables stay usable (each
// update is a handful of map operations), so carry on rather than take the server down.
fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|e| e.into_inner())
}
fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(|e| e.into_inner())
}
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn success(req: &RemotingCommand) -> RemotingCommand {
    RemotingCommand::response_to(req, response_code::SUCCESS, None)
}

fn failure(req: &RemotingCommand, code: i32, remark: impl Into<String>) -> RemotingCommand {
    RemotingCommand::response_to(req, code, Some(remark.into()))
}

/// Decodes the typed header or answers SYSTEM_ERROR naming the bad field, as Java does when
/// header decoding throws.
macro_rules! header_or_fail {
    ($req:expr, $ty:ty) => {
        match $req.decode_header::<$ty>() {
            Ok(h) => h,
            Err(e) => return Some(failure($req, response_code::SYSTEM_ERROR, e.to_string())),
        }
    };
}

/// Builds the dispatcher serving every name-server request code.
pub fn dispatcher(state: Arc<NamesrvState>) -> Dispatcher {
    let mut d = Dispatcher::new();
    let s = state.clone();
    d.register_sync(request_code::REGISTER_BROKER, move |conn, req| Some(register_broker(&s, conn, req)));
    macro_rules! route {
        ($code:expr, $f:ident) => {{
            let s = state.clone();
            d.register_sync($code, move |_conn, req| $f(&s, req));
        }};
    }
    route!(request_code::UNREGISTER_BROKER, unregister_broker);
    route!(request_code::GET_ROUTEINFO_BY_TOPIC, get_route_info);
    route!(request_code::GET_BROKER_CLUSTER_INFO, get_cluster_info);
    route!(request_code::GET_BROKER_MEMBER_GROUP, get_broker_member_group);
    route!(request_code::GET_ALL_TOPIC_LIST_FROM_NAMESERVER, get_all_topics);
    route!(request_code::GET_TOPICS_BY_CLUSTER, get_topics_by_cluster);
    route!(request_code::GET_SYSTEM_TOPIC_LIST_FROM_NS, get_system_topics);
    route!(request_code::GET_UNIT_TOPIC_LIST, get_unit_topics);
    route!(request_code::GET_HAS_UNIT_SUB_TOPIC_LIST, get_unit_sub_topics);
    route!(request_code::GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST, get_unit_sub_ununit_topics);
    route!(request_code::DELETE_TOPIC_IN_NAMESRV, delete_topic);
    route!(request_code::REGISTER_TOPIC_IN_NAMESRV, register_topic);
    route!(request_code::QUERY_DATA_VERSION, query_data_version);
    route!(request_code::BROKER_HEARTBEAT, broker_heartbeat);
    route!(request_code::WIPE_WRITE_PERM_OF_BROKER, wipe_write_perm);
    route!(request_code::ADD_WRITE_PERM_OF_BROKER, add_write_perm);
    route!(request_code::PUT_KV_CONFIG, put_kv);
    route!(request_code::GET_KV_CONFIG, get_kv);
    route!(request_code::DELETE_KV_CONFIG, delete_kv);
    route!(request_code::GET_KVLIST_BY_NAMESPACE, get_kv_list);
    route!(request_code::UPDATE_NAMESRV_CONFIG, update_config);
    route!(request_code::GET_NAMESRV_CONFIG, get_config);
    let s = state;
    d.on_close(move |conn| {
        lock(&s.broker_connections).remove(&conn.id());
        let gone = write(&s.routes).on_connection_closed(conn.id());
        for broker in gone {
            info!(cluster = %broker.cluster, broker_addr = %broker.addr, connection_id = conn.id(), "broker removed: its connection closed");
        }
    });
    d
}

fn register_broker(state: &NamesrvState, conn: &Connection, req: &RemotingCommand) -> RemotingCommand {
    let header = match req.decode_header::<RegisterBrokerRequestHeader>() {
        Ok(h) => h,
        Err(e) => return failure(req, response_code::SYSTEM_ERROR, e.to_string()),
    };
    let crc = header.body_crc32.unwrap_or(0);
    if crc != 0 && crc32_masked(&req.body) as i32 != crc {
        warn!(broker_addr = %header.broker_addr, "broker registration body crc32 mismatch");
        return failure(req, response_code::SYSTEM_ERROR, "crc32 not match");
    }
    let body = if req.body.is_empty() {
        RegisterBrokerBody::default()
    } else {
        match RegisterBrokerBody::decode(&req.body, header.compressed.unwrap_or(false), req.version) {
            Ok(b) => b,
            Err(e) => {
                warn!(broker_addr = %header.broker_addr, error = %e, "malformed broker registration body");
                return failure(req, response_code::SYSTEM_ERROR, format!("malformed register body: {e}"));
            }
        }
    };
    let wrapper = body.topic_config_serialize_wrapper;
    let reg = BrokerRegistration {
        cluster_name: header.cluster_name,
        broker_addr: header.broker_addr,
        broker_name: header.broker_name,
        broker_id: header.broker_id,
        ha_server_addr: header.ha_server_addr,
        // Java's zone ext field (`MixAll.ZONE_NAME`), set by 5.x brokers in zone mode.
        zone_name: req.ext(ZONE_NAME).map(str::to_owned),
        timeout_ms: header.heartbeat_timeout_millis,
        enable_acting_master: header.enable_acting_master,
        data_version: wrapper.data_version,
        topic_config_table: wrapper.topic_config_table,
        topic_queue_mapping_info: wrapper.topic_queue_mapping_info_map,
        filter_server_list: body.filter_server_list,
        connection: Some(conn.id()),
    };
    let (delete_with_registration, return_order_conf) = {
        let c = read(&state.config);
        (c.delete_topic_with_broker_registration, c.return_order_topic_config_to_broker)
    };
    let result = {
        let mut routes = write(&state.routes);
        routes.delete_topic_with_registration = delete_with_registration;
        routes.register_broker(reg, now_ms())
    };
    let result = match result {
        Ok(r) => r,
        Err(e) => {
            warn!(error = %e, "broker registration refused");
            return failure(req, response_code::SYSTEM_ERROR, "register broker failed");
        }
    };
    lock(&state.broker_connections).insert(conn.id(), conn.clone());
    let mut response = success(req).with_header(&RegisterBrokerResponseHeader {
        ha_server_addr: result.ha_server_addr,
        master_addr: result.master_addr,
    });
    if return_order_conf {
        if let Some(table) = lock(&state.kv).namespace(NAMESPACE_ORDER_TOPIC_CONFIG) {
            response.body = Bytes::from(KVTable { table: table.clone() }.encode());
        }
    }
    response
}

fn unregister_broker(state: &NamesrvState, req: &RemotingCommand) -> Option<RemotingCommand> {
    let h = header_or_fail!(req, UnRegisterBrokerRequestHeader);
    write(&state.routes).unregister_broker(&h.cluster_name, &h.broker_addr, &h.broker_name, h.broker_id);
    Some(success(req))
}

fn get_route_info(state: &NamesrvState, req: &RemotingCommand) -> Option<RemotingCommand> {
    let h = header_or_fail!(req, GetRouteInfoRequestHeader);
    let (support_acting_master, order_enabled) = {
        let c = read(&state.config);
        (c.support_acting_master, c.order_message_enable)
    };
    let route: Option<TopicRouteData> = read(&state.routes).pickup_topic_route(&h.topic, support_acting_master);
    let Some(mut route) = route else {
        return Some(failure(
            req,
            response_code::TOPIC_NOT_EXIST,
            format!(
                "No topic route info in name server for the topic: {}\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details.",
                h.topic
            ),
        ));
    };
    if order_enabled {
        route.order_topic_conf = lock(&state.kv).get(NAMESPACE_ORDER_TOPIC_CONFIG, &h.topic).map(str::to_owned);
    }
    if req.ext(ZONE_MODE).is_some_and(|m| m.eq_ignore_ascii_case("true")) {
        if let Some(zone) = req.ext(ZONE_NAME).filter(|z| !z.trim().is_empty()) {
            keep_zone(&mut route, zone);
        }
    }
    // Clients before 4.9.4 expect fastjson's unquoted integer keys, as the Java name server
    // writes them; newer clients (or those asking) get standard JSON.
    let standard = req.version >= version::V4_9_4 || h.accept_standard_json_only.unwrap_or(false);
    Some(success(req).with_body(route.to_json_bytes(standard)))
}

/// Keeps the broker groups of `zone` (case-insensitive) and those whose master is down (their
/// slaves are read wherever they are), with their queues and filter servers. Java:
/// `ZoneRouteRPCHook#filterByZoneName`.
fn keep_zone(route: &mut TopicRouteData, zone: &str) {
    let (kept, removed): (Vec<_>, Vec<_>) = std::mem::take(&mut route.broker_datas).into_iter().partition(|b| {
        !b.broker_addrs.contains_key(&MASTER_ID) || b.zone_name.as_deref().is_some_and(|z| z.eq_ignore_ascii_case(zone))
    });
    route.broker_datas = kept;
    route.queue_datas.retain(|q| !removed.iter().any(|b| b.broker_name == q.broker_name));
    for addr in removed.iter().flat_map(|b| b.broker_addrs.values()) {
        route.filter_server_table.remove(addr);
    }
}

fn get_cluster_info(state: &NamesrvState, req: &RemotingCommand) -> Option<RemotingCommand> {
    let info = read(&state.routes).cluster_info();
    // The Java name server writes ClusterInfo in fastjson's default style; clients expect it.
    match json::to_fastjson_vec(&info) {
        Ok(body) => Some(success(req).with_body(body)),
        Err(e) => Some(failure(req, response_code::SYSTEM_ERROR, e.to_string())),
    }
}

fn get_broker_member_group(state: &NamesrvState, req: &RemotingCommand) -> Option<RemotingCommand> {
    let h = header_or_fail!(req, GetBrokerMemberGroupRequestHeader);
    let body = GetBrokerMemberGroupResponseBody {
        broker_member_group: read(&state.routes).broker_member_group(&h.cluster_name, &h.broker_name),
    };
    match json::to_fastjson_vec(&body) {
        Ok(body) => Some(success(req).with_body(body)),
        Err(e) => Some(failure(req, response_code::SYSTEM_ERROR, e.to_string())),
    }
}

fn get_all_topics(state: &NamesrvState, req: &RemotingCommand) -> Option<RemotingCommand> {
    if !read(&state.config).enable_all_topic_list {
        return Some(failure(req, response_code::SYSTEM_ERROR, "disable"));
    }
    Some(success(req).with_body(read(&state.routes).all_topics().encode()))
}

fn get_topics_by_cluster(state: &NamesrvState, req: &RemotingCommand) -> Option<RemotingCommand> {
    if !read(&state.config).enable_topic_list {
        return Some(failure(req, response_code::SYSTEM_ERROR, "disable"));
    }
    let h = header_or_fail!(req, GetTopicsByClusterRequestHeader);
    Some(success(req).with_body(read(&state.routes).topics_by_cluster(&h.cluster).encode()))
}

fn get_system_topics(state: &NamesrvState, req: &RemotingCommand) -> Option<RemotingCommand> {
    Some(success(req).with_body(read(&state.routes).system_topic_list().encode()))
}

fn unit_topics(state: &NamesrvState, req: &RemotingCommand, keep: fn(i32) -> bool) -> Option<RemotingCommand> {
    if !read(&state.config).enable_topic_list {
        return Some(failure(req, response_code::SYSTEM_ERROR, "disable"));
    }
    Some(success(req).with_body(read(&state.routes).topics_by_sys_flag(keep).encode()))
}

fn get_unit_topics(state: &NamesrvState, req: &RemotingCommand) -> Option<RemotingCommand> {
    unit_topics(state, req, |f| f & TOPIC_SYS_FLAG_UNIT != 0)
}

fn get_unit_sub_topics(state: &NamesrvState, req: &RemotingCommand) -> Option<RemotingCommand> {
    unit_topics(state, req, |f| f & TOPIC_SYS_FLAG_UNIT_SUB != 0)
}

fn get_unit_sub_ununit_topics(state: &NamesrvState, req: &RemotingCommand) -> Option<RemotingCommand> {
    unit_topics(state, req, |f| f & TOPIC_SYS_FLAG_UNIT == 0 && f & TOPIC_SYS_FLAG_UNIT_SUB != 0)
}

fn delete_topic(state: &NamesrvState, req: &RemotingCommand) -> Option<RemotingCommand> {
    let h = header_or_fail!(req, DeleteTopicFromNamesrvRequestHeader);
    write(&state.routes).delete_topic(&h.topic, h.cluster_name.as_deref());
    info!(topic = %h.topic, cluster = ?h.cluster_name, "topic deleted from name server");
    Some(success(req))
}

fn register_topic(state: &NamesrvState, req: &RemotingCommand) -> Option<RemotingCommand> {
    let h = header_or_fail!(req, RegisterTopicRequestHeader);
    if !req.body.is_empty() {
        match TopicRouteData::decode(&req.body) {
            Ok(route) => write(&state.routes).register_topic(&h.topic, &route.queue_datas),
            Err(e) => return Some(failure(req, response_code::SYSTEM_ERROR, format!("malformed route body: {e}"))),
        }
    }
    Some(success(req))
}

fn query_data_version(state: &NamesrvState, req: &RemotingCommand) -> Option<RemotingCommand> {
    let h = header_or_fail!(req, QueryDataVersionRequestHeader);
    let version = if req.body.iter().all(u8::is_ascii_whitespace) {
        None
    } else {
        match DataVersion::decode(&req.body) {
            Ok(v) => Some(v),
            Err(e) => return Some(failure(req, response_code::SYSTEM_ERROR, format!("malformed data version: {e}"))),
        }
    };
    let key = BrokerAddrInfo { cluster: h.cluster_name, addr: h.broker_addr };
    let (changed, registered) = write(&state.routes).query_data_version(&key, version.as_ref(), now_ms());
    let mut response = success(req).with_header(&QueryDataVersionResponseHeader { changed });
    if let Some(v) = registered {
        response.body = Bytes::from(v.encode());
    }
    Some(response)
}

fn broker_heartbeat(state: &NamesrvState, req: &RemotingCommand) -> Option<RemotingCommand> {
    let h = header_or_fail!(req, BrokerHeartbeatRequestHeader);
    let key = BrokerAddrInfo { cluster: h.cluster_name, addr: h.broker_addr };
    write(&state.routes).touch(&key, now_ms());
    Some(success(req))
}

fn wipe_write_perm(state: &NamesrvState, req: &RemotingCommand) -> Option<RemotingCommand> {
    let h = header_or_fail!(req, WipeWritePermOfBrokerRequestHeader);
    let count = write(&state.routes).set_write_perm(&h.broker_name, false);
    info!(broker_name = %h.broker_name, topics = count, "write permission wiped");
    Some(success(req).with_header(&WipeWritePermOfBrokerResponseHeader { wipe_topic_count: count }))
}

fn add_write_perm(state: &NamesrvState, req: &RemotingCommand) -> Option<RemotingCommand> {
    let h = header_or_fail!(req, AddWritePermOfBrokerRequestHeader);
    let count = write(&state.routes).set_write_perm(&h.broker_name, true);
    info!(broker_name = %h.broker_name, topics = count, "write permission added");
    Some(success(req).with_header(&AddWritePermOfBrokerResponseHeader { add_topic_count: count }))
}

fn put_kv(state: &NamesrvState, req: &RemotingCommand) -> Option<RemotingCommand> {
    let h = header_or_fail!(req, PutKvConfigRequestHeader);
    if h.namespace.is_empty() || h.key.is_empty() {
        return Some(failure(req, response_code::SYSTEM_ERROR, "namespace or key is empty"));
    }
    match lock(&state.kv).put(&h.namespace, &h.key, &h.value) {
        Ok(()) => Some(success(req)),
        Err(e) => Some(failure(req, response_code::SYSTEM_ERROR, format!("kv config not persisted: {e}"))),
    }
}

fn get_kv(state: &NamesrvState, req: &RemotingCommand) -> Option<RemotingCommand> {
    let h = header_or_fail!(req, GetKvConfigRequestHeader);
    match lock(&state.kv).get(&h.namespace, &h.key) {
        Some(value) => Some(success(req).with_header(&GetKvConfigResponseHeader { value: Some(value.to_owned()) })),
        None => Some(failure(
            req,
            response_code::QUERY_NOT_FOUND,
            format!("No config item, Namespace: {} Key: {}", h.namespace, h.key),
        )),
    }
}

fn delete_kv(state: &NamesrvState, req: &RemotingCommand) -> Option<RemotingCommand> {
    let h = header_or_fail!(req, DeleteKvConfigRequestHeader);
    match lock(&state.kv).delete(&h.namespace, &h.key) {
        Ok(()) => Some(success(req)),
        Err(e) => Some(failure(req, response_code::SYSTEM_ERROR, format!("kv config not persisted: {e}"))),
    }
}

fn get_kv_list(state: &NamesrvState, req: &RemotingCommand) -> Option<RemotingCommand> {
    let h = header_or_fail!(req, GetKvListByNamespaceRequestHeader);
    match lock(&state.kv).namespace(&h.namespace) {
        Some(table) => Some(success(req).with_body(KVTable { table: table.clone() }.encode())),
        None => {
            Some(failure(req, response_code::QUERY_NOT_FOUND, format!("No config item, Namespace: {}", h.namespace)))
        }
    }
}

fn update_config(state: &NamesrvState, req: &RemotingCommand) -> Option<RemotingCommand> {
    let text = match std::str::from_utf8(&req.body) {
        Ok(t) => t,
        Err(_) => return Some(failure(req, response_code::SYSTEM_ERROR, "config body is not UTF-8")),
    };
    let entries = match properties_text::parse(text) {
        Ok(e) => e,
        Err(e) => return Some(failure(req, response_code::SYSTEM_ERROR, format!("string2Properties error: {e}"))),
    };
    let mut config = write(&state.config);
    let black_list: Vec<String> = config.black_list().into_iter().map(str::to_owned).collect();
    if let Some((key, _)) = entries.iter().find(|(k, _)| black_list.iter().any(|b| b == k)) {
        warn!(key = %key, "refused to update a black-listed config key");
        return Some(failure(req, response_code::NO_PERMISSION, "Can not update config in black list."));
    }
    // Validate on a copy so a bad value leaves the running config untouched.
    let mut updated = config.clone();
    for (key, value) in &entries {
        if let Err(e) = updated.set(key, value) {
            return Some(failure(req, response_code::SYSTEM_ERROR, e.to_string()));
        }
    }
    *config = updated;
    info!(keys = entries.len(), "name server config updated");
    // Applied even when it cannot be persisted, as Java's name server does. The write replaces
    // the file whole (a crash never leaves it torn) and happens under the config lock, so
    // concurrent updates reach the file one at a time and in the order they apply.
    if let Err(e) = ferromq_config::replace_file(&config.config_store_path, config.to_text().as_bytes()) {
        warn!(path = %e.path.display(), error = %e.source, "updated config not persisted");
    }
    drop(config);
    Some(success(req))
}

fn get_config(state: &NamesrvState, req: &RemotingCommand) -> Option<RemotingCommand> {
    let text = read(&state.config).to_text();
    Some(success(req).with_body(text.into_bytes()))
}

/// Expires silent brokers and closes their connections. Returns how many expired.
pub(crate) fn scan_not_active_brokers(state: &NamesrvState) -> usize {
    let expired = write(&state.routes).scan_not_active(now_ms());
    let mut conns = lock(&state.broker_connections);
    for e in &expired {
        if let Some(conn) = e.connection.and_then(|id| conns.remove(&id)) {
            conn.close();
        }
    }
    expired.len()
}
