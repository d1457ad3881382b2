//! The consumer table: which connections are members of which consumer group, and what each
//! group subscribes to. HEART_BEAT registers members and subscriptions; UNREGISTER_CLIENT,
//! closed connections and a periodic scan (clients silent for more than
//! [`CHANNEL_EXPIRED_TIMEOUT_MS`]) remove them. When a group's membership or topic set changes
//! its members get NOTIFY_CONSUMER_IDS_CHANGED, and listeners get a [`ConsumerGroupEvent`].
//! Java: `ConsumerManager`, `ConsumerGroupEvent`, `ConsumerIdsChangeListener`.
//!
//! It does not decode requests, look up subscription-group configs (callers pass
//! `notifyConsumerIdsChangedEnable`) or read the clock (callers pass the time in). Java's
//! compensation table for pull and proxy consumers is not kept.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};

use ferromq_protocol::body::{ConsumeFromWhere, ConsumeType, MessageModel, SubscriptionData};
use ferromq_remoting::{Connection, ConnectionId};
use tracing::{debug, info, warn};

use crate::client::client_channel::{ClientChannelInfo, CHANNEL_EXPIRED_TIMEOUT_MS};
use crate::client::consumer_group_info::ConsumerGroupInfo;
use crate::client::consumer_ids_notifier::ConsumerIdsNotifier;

/// What happened to a consumer group. Java: `ConsumerGroupEvent` and the arguments
/// `ConsumerManager` passes with each.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConsumerGroupEvent {
    /// The group's members or its subscribed topics changed (Java `CHANGE`). Fired whether or
    /// not the members are notified; `client_ids` are the members left (possibly none).
    Change {
        /// Consumer group.
        group: String,
        /// Current members' client ids, sorted.
        client_ids: Vec<String>,
    },
    /// The group's last member left and the group was removed (Java `UNREGISTER`).
    Unregister {
        /// Consumer group.
        group: String,
    },
    /// A member registered the group's subscriptions; fired on every heartbeat that carries
    /// them, changed or not (Java `REGISTER`).
    Register {
        /// Consumer group.
        group: String,
        /// The subscriptions as the heartbeat carried them.
        subscriptions: Vec<SubscriptionData>,
    },
    /// A connection joined the group (Java `CLIENT_REGISTER`).
    ClientRegister {
        /// Consumer group.
        group: String,
        /// The joining client.
        client_id: String,
        /// Topics the joining client subscribes to.
        topics: BTreeSet<String>,
    },
    /// A connection left the group (Java `CLIENT_UNREGISTER`).
    ClientUnregister {
        /// Consumer group.
        group: String,
        /// The leaving client.
        client_id: String,
        /// Topics the group subscribed to when it left.
        topics: BTreeSet<String>,
    },
}

impl ConsumerGroupEvent {
    /// The consumer group the event is about.
    pub fn group(&self) -> &str {
        match self {
            ConsumerGroupEvent::Change { group, .. }
            | ConsumerGroupEvent::Unregister { group }
            | ConsumerGroupEvent::Register { group, .. }
            | ConsumerGroupEvent::ClientRegister { group, .. }
            | ConsumerGroupEvent::ClientUnregister { group, .. } => group,
        }
    }
}

type Listener = Arc<dyn Fn(&ConsumerGroupEvent) + Send + Sync>;

/// What a table update leaves to do once the table lock is released.
#[derive(Default)]
struct Aftermath {
    events: Vec<ConsumerGroupEvent>,
    /// Group -> the members to notify.
    notices: Vec<(String, Vec<Connection>)>,
    /// Connections to close (expired members).
    to_close: Vec<Connection>,
}

/// Consumer groups and their members. Thread-safe; every method takes `&self`.
///
/// Listeners and notices run after the table lock is released, so a listener may call back
/// into the manager.
pub struct ConsumerManager {
    groups: Mutex<BTreeMap<String, ConsumerGroupInfo>>,
    listeners: Mutex<Vec<Listener>>,
    notifier: ConsumerIdsNotifier,
}

impl std::fmt::Debug for ConsumerManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsumerManager")
            .field("groups", &self.lock().len())
            .field("listeners", &lock(&self.listeners).len())
            .field("notifier", &self.notifier)
            .finish()
    }
}

impl Default for ConsumerManager {
    fn default() -> Self {
        Self::new()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every update leaves the tables consistent (whole-entry inserts and removes), so a panic
    // in another holder does not invalidate them.
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl ConsumerManager {
    /// An empty table. Notices are sent on the tokio runtime current at each change, or else
    /// on the one current here, if any.
    pub fn new() -> Self {
        ConsumerManager {
            groups: Mutex::new(BTreeMap::new()),
            listeners: Mutex::new(Vec::new()),
            notifier: ConsumerIdsNotifier::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, ConsumerGroupInfo>> {
        lock(&self.groups)
    }

    /// Calls `listener` with every later event, synchronously on the thread making the change
    /// and after the table lock is released. Listeners should be quick and must not panic.
    /// Java: `ConsumerManager#appendConsumerIdsChangeListener`.
    pub fn on_change(&self, listener: impl Fn(&ConsumerGroupEvent) + Send + Sync + 'static) {
        lock(&self.listeners).push(Arc::new(listener));
    }

    /// Registers or refreshes `info`'s connection as a member of `group` with the consumption
    /// settings and subscriptions of its heartbeat (see [`ConsumerGroupInfo`] for the update
    /// rules). Returns whether membership or the subscribed topics changed; if so, and
    /// `notify_enabled` (the group's `notifyConsumerIdsChangedEnable`) and the group is not
    /// broadcasting, every member is sent NOTIFY_CONSUMER_IDS_CHANGED without waiting.
    /// `info.last_update_ms` is taken as the current time. A connection that has already
    /// closed is not registered. Java: `ConsumerManager#registerConsumer`.
    #[expect(clippy::too_many_arguments, reason = "mirrors the fields of one ConsumerData; callers pass them apart")]
    pub fn register_consumer(
        &self,
        group: &str,
        info: ClientChannelInfo,
        consume_type: ConsumeType,
        message_model: MessageModel,
        consume_from_where: ConsumeFromWhere,
        subscriptions: &[SubscriptionData],
        notify_enabled: bool,
    ) -> bool {
        let mut after = Aftermath::default();
        let changed = {
            let mut groups = self.lock();
            if refuse_closed(group, &info) {
                return false;
            }
            let now_ms = info.last_update_ms;
            let entry = groups.entry(group.to_owned()).or_insert_with(|| {
                ConsumerGroupInfo::new(group, consume_type, message_model, consume_from_where, now_ms)
            });
            entry.notify_consumer_ids_changed = notify_enabled;
            let client_id = info.client_id.clone();
            let joined = entry.update_channel(info, consume_type, message_model, consume_from_where);
            if joined {
                let topics = subscriptions.iter().map(|sub| sub.topic.clone()).collect();
                after.events.push(ConsumerGroupEvent::ClientRegister { group: group.to_owned(), client_id, topics });
            }
            let topics_changed = entry.update_subscriptions(subscriptions, now_ms);
            let changed = joined || topics_changed;
            if changed {
                push_change(entry, &mut after);
            }
            after
                .events
                .push(ConsumerGroupEvent::Register { group: group.to_owned(), subscriptions: subscriptions.to_vec() });
            changed
        };
        self.finish(after);
        changed
    }

    /// Like [`ConsumerManager::register_consumer`] for a 5.x heartbeat sent without
    /// subscriptions (`withoutSub`, unchanged since the last one): membership is refreshed and
    /// the stored subscriptions are kept. Java: `ConsumerManager#registerConsumerWithoutSub`.
    pub fn register_consumer_without_sub(
        &self,
        group: &str,
        info: ClientChannelInfo,
        consume_type: ConsumeType,
        message_model: MessageModel,
        consume_from_where: ConsumeFromWhere,
        notify_enabled: bool,
    ) -> bool {
        let mut after = Aftermath::default();
        let joined = {
            let mut groups = self.lock();
            if refuse_closed(group, &info) {
                return false;
            }
            let now_ms = info.last_update_ms;
            let entry = groups.entry(group.to_owned()).or_insert_with(|| {
                ConsumerGroupInfo::new(group, consume_type, message_model, consume_from_where, now_ms)
            });
            entry.notify_consumer_ids_changed = notify_enabled;
            let client_id = info.client_id.clone();
            let joined = entry.update_channel(info, consume_type, message_model, consume_from_where);
            if joined {
                let topics = entry.subscribed_topics();
                after.events.push(ConsumerGroupEvent::ClientRegister { group: group.to_owned(), client_id, topics });
                push_change(entry, &mut after);
            }
            joined
        };
        self.finish(after);
        joined
    }

    /// Stores the subscription fingerprint a heartbeat carried for the registered `group` and
    /// returns the one stored before (none for a group registered by this heartbeat or not
    /// registered at all).
    pub fn swap_heartbeat_fingerprint(&self, group: &str, fingerprint: i32) -> Option<i32> {
        self.lock().get_mut(group).and_then(|info| info.heartbeat_fingerprint.replace(fingerprint))
    }

    /// Removes `connection_id` from `group` (UNREGISTER_CLIENT); the group goes when its last
    /// member does. The remaining members are notified as the group's latest registration
    /// allowed. Returns whether the connection was a member. Java:
    /// `ConsumerManager#unregisterConsumer`, which takes the notify flag from the request's
    /// subscription-group config and notifies even when nothing was removed.
    pub fn unregister_consumer(&self, group: &str, connection_id: ConnectionId) -> bool {
        let mut after = Aftermath::default();
        let removed = {
            let mut groups = self.lock();
            let removed = remove_members(&mut groups, group, &[connection_id], &mut after);
            for info in &removed {
                info!(consumer_group = group, client_id = %info.client_id, connection_id, "consumer unregistered");
            }
            !removed.is_empty()
        };
        self.finish(after);
        removed
    }

    /// Removes a closed connection from every group it was a member of and notifies the
    /// remaining members. Returns whether it was a member anywhere. Java:
    /// `ConsumerManager#doChannelCloseEvent`.
    pub fn on_connection_closed(&self, connection_id: ConnectionId) -> bool {
        let mut after = Aftermath::default();
        let removed = {
            let mut groups = self.lock();
            let member_of: Vec<String> = groups
                .iter()
                .filter(|(_, info)| info.channels.contains_key(&connection_id))
                .map(|(group, _)| group.clone())
                .collect();
            for group in &member_of {
                for info in remove_members(&mut groups, group, &[connection_id], &mut after) {
                    info!(consumer_group = %group, client_id = %info.client_id, connection_id,
                        "consumer connection closed; removed");
                }
            }
            !member_of.is_empty()
        };
        self.finish(after);
        removed
    }

    /// Removes every member silent for more than [`CHANNEL_EXPIRED_TIMEOUT_MS`] at `now_ms`,
    /// closes its connection and notifies the remaining members. Returns how many memberships
    /// were removed. Java: `ConsumerManager#scanNotActiveChannel`, which notifies nobody and
    /// fires no `UNREGISTER` when a group empties.
    pub fn scan_not_active(&self, now_ms: i64) -> usize {
        let mut after = Aftermath::default();
        let mut removed = 0;
        {
            let mut groups = self.lock();
            let expired: Vec<(String, Vec<ConnectionId>)> = groups
                .iter()
                .filter_map(|(group, info)| {
                    let ids: Vec<ConnectionId> =
                        info.channels.values().filter(|c| c.is_expired(now_ms)).map(|c| c.connection_id()).collect();
                    (!ids.is_empty()).then(|| (group.clone(), ids))
                })
                .collect();
            for (group, ids) in expired {
                for info in remove_members(&mut groups, &group, &ids, &mut after) {
                    warn!(consumer_group = %group, client_id = %info.client_id, connection_id = info.connection_id(),
                        remote_addr = %info.connection.remote_addr(), silent_ms = now_ms - info.last_update_ms,
                        timeout_ms = CHANNEL_EXPIRED_TIMEOUT_MS, "consumer expired; closing its connection");
                    after.to_close.push(info.connection);
                    removed += 1;
                }
            }
        }
        self.finish(after);
        removed
    }

    /// The group's subscription to `topic`, if any. Java: `ConsumerManager#findSubscriptionData`.
    pub fn find_subscription(&self, group: &str, topic: &str) -> Option<SubscriptionData> {
        self.lock().get(group)?.subscriptions.get(topic).cloned()
    }

    /// A snapshot of `group`, if it has members.
    pub fn group(&self, group: &str) -> Option<ConsumerGroupInfo> {
        self.lock().get(group).cloned()
    }

    /// The groups with at least one member.
    pub fn groups(&self) -> BTreeSet<String> {
        self.lock().keys().cloned().collect()
    }

    /// The members' client ids, sorted and deduplicated (GET_CONSUMER_LIST_BY_GROUP); empty
    /// for an unknown group.
    pub fn client_ids(&self, group: &str) -> Vec<String> {
        self.lock().get(group).map(ConsumerGroupInfo::client_ids).unwrap_or_default()
    }

    /// The members in connection order (GET_CONSUMER_CONNECTION_LIST); empty for an unknown
    /// group.
    pub fn connections(&self, group: &str) -> Vec<ClientChannelInfo> {
        self.lock().get(group).map(|info| info.channels.values().cloned().collect()).unwrap_or_default()
    }

    /// The member of `group` with `client_id`, for calling that client (running info,
    /// offset reset). Java: `ConsumerManager#findChannel(String, String)`.
    pub fn find_channel(&self, group: &str, client_id: &str) -> Option<ClientChannelInfo> {
        self.lock().get(group)?.find_channel(client_id).cloned()
    }

    /// The groups subscribing to `topic`. Java 5.x keeps a topic index that is never pruned
    /// when a group drops a topic; this reads the live subscriptions, as Java 4.x did.
    pub fn query_topic_consume_by_who(&self, topic: &str) -> BTreeSet<String> {
        self.lock()
            .iter()
            .filter(|(_, info)| info.subscriptions.contains_key(topic))
            .map(|(group, _)| group.clone())
            .collect()
    }

    /// Waits until every NOTIFY_CONSUMER_IDS_CHANGED started so far has been sent (queued on
    /// its connection) or given up. For shutdown, and for tests.
    pub async fn flush_notifications(&self) {
        self.notifier.flush().await;
    }

    /// Sends the notices, closes connections and tells the listeners, outside the table lock.
    fn finish(&self, after: Aftermath) {
        for (group, connections) in after.notices {
            self.notifier.notify(&group, connections);
        }
        for connection in &after.to_close {
            connection.close();
        }
        if after.events.is_empty() {
            return;
        }
        let listeners: Vec<Listener> = lock(&self.listeners).clone();
        for event in &after.events {
            for listener in &listeners {
                listener(event);
            }
        }
    }
}

/// Whether `info`'s connection has already closed, so registering it would leave a member
/// nobody removes until it expires. Checked under the table lock: the close hook runs after
/// the connection is marked closed and takes the same lock, so a registration either sees the
/// close or is undone by the hook.
fn refuse_closed(group: &str, info: &ClientChannelInfo) -> bool {
    let closed = info.connection.is_closed();
    if closed {
        debug!(consumer_group = group, client_id = %info.client_id, connection_id = info.connection_id(),
            "registration from a closed connection ignored");
    }
    closed
}

/// Records a `Change` of `info` and, if its members are to be told, a notice to each.
fn push_change(info: &ConsumerGroupInfo, after: &mut Aftermath) {
    after.events.push(ConsumerGroupEvent::Change { group: info.group_name.clone(), client_ids: info.client_ids() });
    if info.notify_consumer_ids_changed && info.is_clustering() && !info.channels.is_empty() {
        after.notices.push((info.group_name.clone(), info.connections()));
    }
}

/// Removes `connection_ids` from `group`, dropping the group if none is left, and records the
/// events and notices. Returns the removed members.
fn remove_members(
    groups: &mut BTreeMap<String, ConsumerGroupInfo>,
    group: &str,
    connection_ids: &[ConnectionId],
    after: &mut Aftermath,
) -> Vec<ClientChannelInfo> {
    let Some(info) = groups.get_mut(group) else { return Vec::new() };
    let removed: Vec<ClientChannelInfo> = connection_ids.iter().filter_map(|id| info.channels.remove(id)).collect();
    if removed.is_empty() {
        return removed;
    }
    for member in &removed {
        after.events.push(ConsumerGroupEvent::ClientUnregister {
            group: group.to_owned(),
            client_id: member.client_id.clone(),
            topics: info.subscribed_topics(),
        });
    }
    if info.channels.is_empty() {
        info!(consumer_group = group, "consumer group unregistered: no member left");
        after.events.push(ConsumerGroupEvent::Unregister { group: group.to_owned() });
    }
    push_change(info, after);
    if info.channels.is_empty() {
        groups.remove(group);
    }
    removed
}
