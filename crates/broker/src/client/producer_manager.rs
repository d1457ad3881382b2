//! The producer table: which connections run which producer group. HEART_BEAT fills it,
//! UNREGISTER_CLIENT and closed connections empty it, and a periodic scan drops clients silent
//! for longer than [`CHANNEL_EXPIRED_TIMEOUT_MS`]. GET_PRODUCER_CONNECTION_LIST reads it, and
//! the transaction check picks a producer connection of a group from it.
//! Java: `ProducerManager`.
//!
//! It does not decode requests or read the clock: callers pass the time in.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use ferromq_remoting::{Connection, ConnectionId};
use tracing::{debug, info, warn};

use crate::client::client_channel::{ClientChannelInfo, CHANNEL_EXPIRED_TIMEOUT_MS};

/// Connection id -> the producer client on it.
type ChannelTable = BTreeMap<ConnectionId, ClientChannelInfo>;

/// Producer groups and their connections. Thread-safe; every method takes `&self`.
#[derive(Debug, Default)]
pub struct ProducerManager {
    /// Group -> its connections. A group with no connection left is removed.
    groups: Mutex<BTreeMap<String, ChannelTable>>,
    /// Round-robin cursor for [`ProducerManager::any_connection`].
    next_pick: AtomicUsize,
}

impl ProducerManager {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, ChannelTable>> {
        // Every update leaves the map consistent (single inserts and removes), so a panic in
        // another holder does not invalidate it.
        self.groups.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records that `info`'s connection runs producer `group`, or refreshes it (a heartbeat).
    /// Returns whether the connection is new to the group; a closed connection is not
    /// recorded. Java:
    /// `ProducerManager#registerProducer`.
    pub fn register(&self, group: &str, info: ClientChannelInfo) -> bool {
        let connection_id = info.connection_id();
        let mut groups = self.lock();
        // Checked under the lock: the close hook runs after the connection is marked closed
        // and takes the same lock, so a registration either sees the close or is undone.
        if info.connection.is_closed() {
            debug!(producer_group = group, client_id = %info.client_id, connection_id,
                "registration from a closed connection ignored");
            return false;
        }
        let table = groups.entry(group.to_owned()).or_default();
        let is_new = !table.contains_key(&connection_id);
        if is_new {
            info!(producer_group = group, client_id = %info.client_id, connection_id,
                remote_addr = %info.connection.remote_addr(), "producer registered");
        }
        // Replacing the entry refreshes its timestamp and takes the latest client id, language
        // and version the connection announced.
        table.insert(connection_id, info);
        is_new
    }

    /// Removes `connection_id` from `group` (UNREGISTER_CLIENT); drops the group when it was
    /// the last one. Returns whether it was registered. Java: `ProducerManager#unregisterProducer`.
    pub fn unregister(&self, group: &str, connection_id: ConnectionId) -> bool {
        let mut groups = self.lock();
        let Some(table) = groups.get_mut(group) else { return false };
        let removed = table.remove(&connection_id);
        if let Some(info) = &removed {
            info!(producer_group = group, client_id = %info.client_id, connection_id, "producer unregistered");
        }
        if table.is_empty() {
            groups.remove(group);
            info!(producer_group = group, "producer group unregistered: no connection left");
        }
        removed.is_some()
    }

    /// Forgets a closed connection in every group. Returns whether it was registered anywhere.
    /// Java: `ProducerManager#doChannelCloseEvent`.
    pub fn on_connection_closed(&self, connection_id: ConnectionId) -> bool {
        let mut groups = self.lock();
        let mut removed = false;
        groups.retain(|group, table| {
            if let Some(info) = table.remove(&connection_id) {
                removed = true;
                info!(producer_group = %group, client_id = %info.client_id, connection_id,
                    "producer connection closed; removed");
            }
            !table.is_empty()
        });
        removed
    }

    /// Drops every producer silent for more than [`CHANNEL_EXPIRED_TIMEOUT_MS`] at `now_ms`
    /// and closes its connection. Returns how many registrations were dropped.
    /// Java: `ProducerManager#scanNotActiveChannel`.
    pub fn scan_not_active(&self, now_ms: i64) -> usize {
        let mut expired = Vec::new();
        {
            let mut groups = self.lock();
            groups.retain(|group, table| {
                table.retain(|_, info| {
                    if info.is_expired(now_ms) {
                        warn!(producer_group = %group, client_id = %info.client_id, connection_id = info.connection_id(),
                            remote_addr = %info.connection.remote_addr(), silent_ms = now_ms - info.last_update_ms,
                            timeout_ms = CHANNEL_EXPIRED_TIMEOUT_MS, "producer expired; closing its connection");
                        expired.push(info.connection.clone());
                        false
                    } else {
                        true
                    }
                });
                !table.is_empty()
            });
        }
        // Closed outside the lock: closing only signals the connection task, whose close hook
        // may come back here.
        for connection in &expired {
            connection.close();
        }
        expired.len()
    }

    /// The producers of `group`, in connection order (GET_PRODUCER_CONNECTION_LIST).
    pub fn group_connections(&self, group: &str) -> Vec<ClientChannelInfo> {
        self.lock().get(group).map(|table| table.values().cloned().collect()).unwrap_or_default()
    }

    /// One open connection of `group`, rotating between calls so transaction checks spread
    /// over the group's producers; `None` if the group has no open connection.
    /// Java: `ProducerManager#getAvailableChannel`.
    pub fn any_connection(&self, group: &str) -> Option<Connection> {
        let groups = self.lock();
        let table = groups.get(group)?;
        let open: Vec<&ClientChannelInfo> = table.values().filter(|info| !info.connection.is_closed()).collect();
        if open.is_empty() {
            warn!(producer_group = group, registered = table.len(), "no open producer connection");
            return None;
        }
        let pick = self.next_pick.fetch_add(1, Ordering::Relaxed) % open.len();
        Some(open[pick].connection.clone())
    }

    /// An open connection of the producer client `client_id`, whatever its group (the
    /// requester of a request-reply exchange). Java: `ProducerManager#findChannel`.
    pub fn find_connection(&self, client_id: &str) -> Option<Connection> {
        let groups = self.lock();
        groups
            .values()
            .flat_map(|table| table.values())
            .find(|info| info.client_id == client_id && !info.connection.is_closed())
            .map(|info| info.connection.clone())
    }

    /// Every group with its producers, in connection order (GET_ALL_PRODUCER_INFO).
    pub fn table(&self) -> BTreeMap<String, Vec<ClientChannelInfo>> {
        self.lock().iter().map(|(group, table)| (group.clone(), table.values().cloned().collect())).collect()
    }

    /// The producer groups with at least one connection.
    pub fn groups(&self) -> BTreeSet<String> {
        self.lock().keys().cloned().collect()
    }
}
