//! The remoting clients connected to the proxy's remoting port (Java: the proxy's
//! `ProducerManager` and `ConsumerManager` fed by `ClientManagerActivity`): who they are, the
//! groups they belong to, their last heartbeat, and the brokers that heartbeat was forwarded to.
//!
//! A RocketMQ client instance talks to one address over one connection, and the proxy is one
//! address for every broker, so the table is keyed by connection. Its size is bounded by the
//! remoting server's connection limit.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Mutex;

use bytes::Bytes;
use ferromq_protocol::body::{ConsumerData, HeartbeatData};
use ferromq_protocol::LanguageCode;
use ferromq_remoting::{Connection, ConnectionId};

/// One connected client instance.
#[derive(Debug, Clone)]
pub struct ConnectedClient {
    /// Its connection to the proxy.
    pub conn: Connection,
    /// `clientID` of its heartbeats.
    pub client_id: String,
    /// Language and version of its last heartbeat (forwarded heartbeats carry them).
    pub language: LanguageCode,
    /// The `version` of its requests.
    pub version: i32,
    /// Producer groups it heartbeats for.
    pub producer_groups: BTreeSet<String>,
    /// Consumer groups, with the subscriptions of its last heartbeat.
    pub consumer_groups: BTreeMap<String, ConsumerData>,
    /// Its last heartbeat's body, as sent to brokers.
    pub heartbeat: Bytes,
    /// Brokers (master addresses) that have been sent that heartbeat.
    pub brokers: BTreeSet<String>,
}

/// A client that left (unregistered or disconnected), and what brokers must forget of it.
#[derive(Debug, Clone, Default)]
pub struct Departure {
    /// Its client id.
    pub client_id: String,
    /// Producer groups no other client of this proxy belongs to any more.
    pub last_producer_groups: Vec<String>,
    /// Consumer groups no other client of this proxy belongs to any more.
    pub last_consumer_groups: Vec<String>,
    /// Consumer groups it left that other clients of this proxy still belong to (their
    /// consumers are told to rebalance).
    pub shared_consumer_groups: Vec<String>,
    /// The brokers its heartbeats went to.
    pub brokers: BTreeSet<String>,
}

/// What a heartbeat changed.
#[derive(Debug, Clone, Default)]
pub struct Registered {
    /// Consumer groups the client was not in before (the group's members change).
    pub joined_consumer_groups: Vec<String>,
    /// Consumer groups of an earlier heartbeat it no longer names.
    pub left: Departure,
}

/// The table of remoting clients.
#[derive(Debug, Default)]
pub struct RemotingClients {
    table: Mutex<Table>,
}

#[derive(Debug, Default)]
struct Table {
    by_conn: HashMap<ConnectionId, ConnectedClient>,
    by_client_id: HashMap<String, ConnectionId>,
}

impl Table {
    fn in_producer_group(&self, group: &str) -> bool {
        self.by_conn.values().any(|c| c.producer_groups.contains(group))
    }

    fn in_consumer_group(&self, group: &str) -> bool {
        self.by_conn.values().any(|c| c.consumer_groups.contains_key(group))
    }

    /// Sorts the groups `client` left into the last and the shared ones (after its removal).
    fn departure(&self, client: &ConnectedClient, producers: Vec<String>, consumers: Vec<String>) -> Departure {
        let mut d =
            Departure { client_id: client.client_id.clone(), brokers: client.brokers.clone(), ..Default::default() };
        d.last_producer_groups = producers.into_iter().filter(|g| !self.in_producer_group(g)).collect();
        for g in consumers {
            if self.in_consumer_group(&g) {
                d.shared_consumer_groups.push(g);
            } else {
                d.last_consumer_groups.push(g);
            }
        }
        d
    }
}

fn lock(m: &Mutex<Table>) -> std::sync::MutexGuard<'_, Table> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl RemotingClients {
    /// Records a heartbeat that arrived on `conn` (body `body`, decoded as `hb`).
    pub fn heartbeat(
        &self,
        conn: &Connection,
        hb: &HeartbeatData,
        body: Bytes,
        language: LanguageCode,
        version: i32,
    ) -> Registered {
        let mut t = lock(&self.table);
        let producer_groups: BTreeSet<String> = hb.producer_data_set.iter().map(|p| p.group_name.clone()).collect();
        let consumer_groups: BTreeMap<String, ConsumerData> =
            hb.consumer_data_set.iter().map(|c| (c.group_name.clone(), c.clone())).collect();
        let previous = t.by_conn.remove(&conn.id());
        if let Some(p) = &previous {
            if p.client_id != hb.client_id {
                t.by_client_id.remove(&p.client_id);
            }
        }
        let brokers = previous.as_ref().map(|p| p.brokers.clone()).unwrap_or_default();
        let mut registered = Registered::default();
        if let Some(p) = &previous {
            // A heartbeat lists every group of the instance: groups it no longer names are left.
            let producers_left: Vec<String> = p.producer_groups.difference(&producer_groups).cloned().collect();
            let consumers_left: Vec<String> =
                p.consumer_groups.keys().filter(|g| !consumer_groups.contains_key(*g)).cloned().collect();
            registered.left = t.departure(p, producers_left, consumers_left);
        }
        registered.joined_consumer_groups = consumer_groups
            .keys()
            .filter(|g| previous.as_ref().is_none_or(|p| !p.consumer_groups.contains_key(*g)))
            .cloned()
            .collect();
        t.by_client_id.insert(hb.client_id.clone(), conn.id());
        t.by_conn.insert(
            conn.id(),
            ConnectedClient {
                conn: conn.clone(),
                client_id: hb.client_id.clone(),
                language,
                version,
                producer_groups,
                consumer_groups,
                heartbeat: body,
                brokers,
            },
        );
        registered
    }

    /// The client on `conn`, if it has sent a heartbeat.
    pub fn on_connection(&self, conn: &Connection) -> Option<ConnectedClient> {
        lock(&self.table).by_conn.get(&conn.id()).cloned()
    }

    /// The heartbeat (body, language, version) of the client on `conn` when `broker` has not
    /// been sent it yet; `None` when it has, or when the connection has sent no heartbeat.
    pub fn heartbeat_unknown_to(&self, conn: &Connection, broker: &str) -> Option<(Bytes, LanguageCode, i32)> {
        let t = lock(&self.table);
        let c = t.by_conn.get(&conn.id())?;
        (!c.brokers.contains(broker)).then(|| (c.heartbeat.clone(), c.language, c.version))
    }

    /// Marks `broker` as sent the client's heartbeat; `true` when it was not before.
    pub fn note_broker(&self, conn: &Connection, broker: &str) -> bool {
        lock(&self.table).by_conn.get_mut(&conn.id()).is_some_and(|c| c.brokers.insert(broker.to_owned()))
    }

    /// Forgets that `broker` has the client's heartbeat (forwarding it failed).
    pub fn forget_broker(&self, conn: &Connection, broker: &str) {
        if let Some(c) = lock(&self.table).by_conn.get_mut(&conn.id()) {
            c.brokers.remove(broker);
        }
    }

    /// UNREGISTER_CLIENT: the client on `conn` leaves the groups named (both `None`: all).
    /// `None` when the connection has no client with that id.
    pub fn unregister(
        &self,
        conn: &Connection,
        client_id: &str,
        producer_group: Option<&str>,
        consumer_group: Option<&str>,
    ) -> Option<Departure> {
        let mut t = lock(&self.table);
        let mut client = t.by_conn.remove(&conn.id())?;
        if client.client_id != client_id {
            t.by_conn.insert(conn.id(), client);
            return None;
        }
        let everything = producer_group.is_none() && consumer_group.is_none();
        let producers: Vec<String> = match producer_group {
            _ if everything => std::mem::take(&mut client.producer_groups).into_iter().collect(),
            Some(g) if client.producer_groups.remove(g) => vec![g.to_owned()],
            _ => Vec::new(),
        };
        let consumers: Vec<String> = match consumer_group {
            _ if everything => std::mem::take(&mut client.consumer_groups).into_keys().collect(),
            Some(g) if client.consumer_groups.remove(g).is_some() => vec![g.to_owned()],
            _ => Vec::new(),
        };
        let departure = t.departure(&client, producers, consumers);
        if client.producer_groups.is_empty() && client.consumer_groups.is_empty() {
            t.by_client_id.remove(&client.client_id);
        } else {
            t.by_conn.insert(conn.id(), client);
        }
        Some(departure)
    }

    /// The connection closed: its client leaves every group.
    pub fn closed(&self, conn: &Connection) -> Option<Departure> {
        let mut t = lock(&self.table);
        let client = t.by_conn.remove(&conn.id())?;
        if t.by_client_id.get(&client.client_id) == Some(&conn.id()) {
            t.by_client_id.remove(&client.client_id);
        }
        let producers = client.producer_groups.iter().cloned().collect();
        let consumers = client.consumer_groups.keys().cloned().collect();
        Some(t.departure(&client, producers, consumers))
    }

    /// Whether a client connected here belongs to producer group `group`.
    pub fn has_producer_of(&self, group: &str) -> bool {
        lock(&self.table).in_producer_group(group)
    }

    /// Client ids of the group's consumers connected here, sorted.
    pub fn consumer_ids(&self, group: &str) -> Vec<String> {
        let mut ids: Vec<String> = lock(&self.table)
            .by_conn
            .values()
            .filter(|c| c.consumer_groups.contains_key(group))
            .map(|c| c.client_id.clone())
            .collect();
        ids.sort();
        ids.dedup();
        ids
    }

    /// The group's consumers connected here: each one's connection as GET_CONSUMER_CONNECTION_LIST
    /// shows it and its last heartbeat's data for the group, by client id.
    pub fn consumer_members(&self, group: &str) -> Vec<(ferromq_protocol::body::Connection, ConsumerData)> {
        let mut members: Vec<_> = lock(&self.table)
            .by_conn
            .values()
            .filter_map(|c| {
                let data = c.consumer_groups.get(group)?;
                let conn = ferromq_protocol::body::Connection {
                    client_addr: c.conn.remote_addr().to_string(),
                    client_id: c.client_id.clone(),
                    language: c.language,
                    version: c.version,
                };
                Some((conn, data.clone()))
            })
            .collect();
        members.sort_by(|a, b| a.0.client_id.cmp(&b.0.client_id));
        members
    }

    /// The connections of the group's consumers (to tell them the group changed).
    pub fn consumer_connections(&self, group: &str) -> Vec<Connection> {
        lock(&self.table)
            .by_conn
            .values()
            .filter(|c| c.consumer_groups.contains_key(group) && !c.conn.is_closed())
            .map(|c| c.conn.clone())
            .collect()
    }

    /// The connection of a live producer of `group` (the one with the lowest connection id,
    /// so repeated checks go to the same producer while it lives).
    pub fn producer_connection(&self, group: &str) -> Option<Connection> {
        lock(&self.table)
            .by_conn
            .iter()
            .filter(|(_, c)| c.producer_groups.contains(group) && !c.conn.is_closed())
            .min_by_key(|(id, _)| **id)
            .map(|(_, c)| c.conn.clone())
    }

    /// The connection of the client `client_id`, if it is connected here.
    pub fn connection_of(&self, client_id: &str) -> Option<Connection> {
        let t = lock(&self.table);
        let id = t.by_client_id.get(client_id)?;
        t.by_conn.get(id).map(|c| c.conn.clone()).filter(|c| !c.is_closed())
    }

    /// Clients connected now.
    pub fn len(&self) -> usize {
        lock(&self.table).by_conn.len()
    }

    /// Whether no client is connected.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
