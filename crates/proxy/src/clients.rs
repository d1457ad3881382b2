//! The gRPC clients the proxy knows (Java: `GrpcClientSettingsManager`, `GrpcChannelManager`):
//! each client id's Settings, what it registered, when it was last heard from, and its
//! Telemetry stream, through which the proxy sends it commands.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};

use crate::namespace;
use crate::pb::{self, ClientType};

/// The most clients remembered at once; a new client beyond it is refused (TOO_MANY_REQUESTS).
pub const CLIENTS_MAX: usize = 100_000;

/// Commands waiting for a client's answer, per client.
pub const PENDING_COMMANDS_MAX: usize = 64;

/// Frames queued on one Telemetry stream before a send fails (the client is not reading).
pub const TELEMETRY_QUEUE: usize = 64;

/// How long a request from a client whose Settings are not known yet waits for them. Some
/// SDKs (Python 5.x) open their Telemetry stream in the background and may call Receive or
/// Heartbeat before the proxy has read its Settings; Java's proxy answers at once with
/// UNRECOGNIZED_CLIENT_TYPE, which fails the first call of such a client at random.
pub const SETTINGS_WAIT: Duration = Duration::from_secs(3);

/// The sender side of a client's Telemetry stream.
pub type TelemetrySender = mpsc::Sender<Result<pb::TelemetryCommand, tonic::Status>>;

/// One client.
#[derive(Debug)]
pub struct ClientRecord {
    /// Its kind, from Settings.
    pub client_type: ClientType,
    /// The merged Settings the proxy answered with.
    pub settings: pb::Settings,
    /// Producers: the topics it publishes to (each is a producer group).
    pub topics: Vec<String>,
    /// Consumers: its group.
    pub group: Option<String>,
    /// Consumers: topic and filter of each subscription.
    pub subscriptions: Vec<(String, pb::FilterExpression)>,
    /// `x-mq-language`.
    pub language: String,
    /// The namespace of its Settings' resources (empty: none); names shown to it leave it out.
    pub namespace: String,
    /// `x-mq-client-version`.
    pub version: String,
    /// Where it connects from.
    pub peer: Option<SocketAddr>,
    /// When it was last heard from.
    pub last_seen: Instant,
    telemetry: Option<(u64, TelemetrySender)>,
    pending: HashMap<String, oneshot::Sender<pb::TelemetryCommand>>,
}

impl ClientRecord {
    /// A record from the client's first Settings.
    pub fn new(
        client_type: ClientType,
        settings: pb::Settings,
        language: &str,
        version: &str,
        peer: Option<SocketAddr>,
    ) -> Self {
        let (mut topics, mut group, mut subscriptions) = (Vec::new(), None, Vec::new());
        let namespace = crate::namespace::namespace_of(match &settings.pub_sub {
            Some(pb::settings::PubSub::Publishing(p)) => p.topics.first(),
            Some(pb::settings::PubSub::Subscription(s)) => s.group.as_ref(),
            None => None,
        });
        match &settings.pub_sub {
            // Names as brokers know them: in the resource's namespace.
            Some(pb::settings::PubSub::Publishing(p)) => topics = p.topics.iter().map(namespace::of).collect(),
            Some(pb::settings::PubSub::Subscription(s)) => {
                group = s.group.as_ref().map(namespace::of);
                subscriptions = s
                    .subscriptions
                    .iter()
                    .filter_map(|e| Some((namespace::of(e.topic.as_ref()?), e.expression.clone().unwrap_or_default())))
                    .collect();
            }
            None => {}
        }
        ClientRecord {
            client_type,
            settings,
            topics,
            group,
            subscriptions,
            language: language.to_owned(),
            namespace,
            version: version.to_owned(),
            peer,
            last_seen: Instant::now(),
            telemetry: None,
            pending: HashMap::new(),
        }
    }

    /// Whether the client is a consumer.
    pub fn is_consumer(&self) -> bool {
        matches!(self.client_type, ClientType::PushConsumer | ClientType::SimpleConsumer)
    }
}

/// The registry is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooManyClients;

/// What became of a client that was dropped.
#[derive(Debug)]
pub struct Departed {
    /// Its id.
    pub client_id: String,
    /// Its record.
    pub record: ClientRecord,
}

/// Every client, by client id.
#[derive(Debug, Default)]
pub struct ClientRegistry {
    clients: Mutex<HashMap<String, ClientRecord>>,
    stream_ids: AtomicU64,
    /// Whose turn the next transaction check is, among a topic's producers.
    check_turn: std::sync::atomic::AtomicUsize,
    /// Woken whenever a record is stored (see [`ClientRegistry::touch_when_known`]).
    stored: tokio::sync::Notify,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl ClientRegistry {
    /// Stores (or replaces, keeping its Telemetry stream) a client's record.
    ///
    /// # Errors
    /// [`TooManyClients`] when [`CLIENTS_MAX`] clients are known already.
    pub fn upsert(&self, client_id: &str, mut record: ClientRecord) -> Result<(), TooManyClients> {
        let mut map = lock(&self.clients);
        if let Some(old) = map.get_mut(client_id) {
            record.telemetry = old.telemetry.take();
            record.pending = std::mem::take(&mut old.pending);
            *old = record;
            return Ok(());
        }
        if map.len() >= CLIENTS_MAX {
            return Err(TooManyClients);
        }
        map.insert(client_id.to_owned(), record);
        drop(map);
        self.stored.notify_waiters();
        Ok(())
    }

    /// As [`ClientRegistry::touch`], but a client not known yet is waited for, up to `wait`
    /// (its Settings may be on their way on the Telemetry stream).
    pub async fn touch_when_known<R>(
        &self,
        client_id: &str,
        wait: Duration,
        f: impl Fn(&ClientRecord) -> R,
    ) -> Option<R> {
        let until = tokio::time::Instant::now() + wait;
        loop {
            // Registered before the look-up, so a store between the two is not missed.
            let stored = self.stored.notified();
            tokio::pin!(stored);
            stored.as_mut().enable();
            if let Some(r) = self.touch(client_id, &f) {
                return Some(r);
            }
            if tokio::time::timeout_at(until, stored).await.is_err() {
                return None;
            }
        }
    }

    /// Runs `f` on the client's record, refreshing its last-seen time.
    pub fn touch<R>(&self, client_id: &str, f: impl FnOnce(&ClientRecord) -> R) -> Option<R> {
        let mut map = lock(&self.clients);
        let r = map.get_mut(client_id)?;
        r.last_seen = Instant::now();
        Some(f(r))
    }

    /// Runs `f` on the client's record.
    pub fn with<R>(&self, client_id: &str, f: impl FnOnce(&ClientRecord) -> R) -> Option<R> {
        lock(&self.clients).get(client_id).map(f)
    }

    /// Attaches a Telemetry stream; returns its id, used to detach only that stream.
    pub fn attach_telemetry(&self, client_id: &str, tx: TelemetrySender) -> Option<u64> {
        let id = self.stream_ids.fetch_add(1, Ordering::Relaxed);
        let mut map = lock(&self.clients);
        let r = map.get_mut(client_id)?;
        r.telemetry = Some((id, tx));
        r.last_seen = Instant::now();
        Some(id)
    }

    /// The stream `stream_id` ended.
    pub fn detach_telemetry(&self, client_id: &str, stream_id: u64) {
        if let Some(r) = lock(&self.clients).get_mut(client_id) {
            if r.telemetry.as_ref().is_some_and(|(id, _)| *id == stream_id) {
                r.telemetry = None;
                r.pending.clear();
            }
        }
    }

    /// Removes a client.
    pub fn remove(&self, client_id: &str) -> Option<Departed> {
        lock(&self.clients).remove(client_id).map(|record| Departed { client_id: client_id.to_owned(), record })
    }

    /// Removes the clients not heard from for `idle`.
    pub fn expire(&self, idle: Duration) -> Vec<Departed> {
        let mut map = lock(&self.clients);
        let gone: Vec<String> =
            map.iter().filter(|(_, r)| r.last_seen.elapsed() > idle).map(|(k, _)| k.clone()).collect();
        gone.into_iter().filter_map(|k| map.remove(&k).map(|record| Departed { client_id: k, record })).collect()
    }

    /// A live producer of `topic` with an open Telemetry stream (for transaction checks).
    pub fn telemetry_of_producer(&self, topic: &str) -> Option<(String, TelemetrySender)> {
        let map = lock(&self.clients);
        let mut live: Vec<_> = map
            .iter()
            .filter(|(_, r)| r.client_type == ClientType::Producer && r.topics.iter().any(|t| t == topic))
            .filter_map(|(k, r)| r.telemetry.as_ref().map(|(_, tx)| (k.clone(), tx.clone())))
            .filter(|(_, tx)| !tx.is_closed())
            .collect();
        if live.is_empty() {
            return None;
        }
        // Spread checks over the producers: each call takes the next one (the map's order is
        // stable while it is not changed, so a counter walks through them).
        let i = self.check_turn.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % live.len();
        Some(live.swap_remove(i))
    }

    /// The known consumers of `group`, by client id.
    pub fn consumer_ids_of(&self, group: &str) -> Vec<String> {
        let mut ids: Vec<String> = lock(&self.clients)
            .iter()
            .filter(|(_, r)| r.is_consumer() && r.group.as_deref() == Some(group))
            .map(|(id, _)| id.clone())
            .collect();
        ids.sort();
        ids
    }

    /// Whether a known client is a consumer of `group`.
    pub fn has_consumer_of(&self, group: &str) -> bool {
        lock(&self.clients).values().any(|r| r.is_consumer() && r.group.as_deref() == Some(group))
    }

    /// Whether a known client is a producer of `topic` (its producer group).
    pub fn has_producer_of(&self, topic: &str) -> bool {
        lock(&self.clients)
            .values()
            .any(|r| r.client_type == ClientType::Producer && r.topics.iter().any(|t| t == topic))
    }

    /// The Telemetry stream of `client_id`, if open.
    pub fn telemetry_of(&self, client_id: &str) -> Option<TelemetrySender> {
        lock(&self.clients).get(client_id).and_then(|r| r.telemetry.as_ref().map(|(_, tx)| tx.clone()))
    }

    /// Registers a wait for the client's answer to the command with `nonce`.
    pub fn expect_answer(&self, client_id: &str, nonce: &str) -> Option<oneshot::Receiver<pb::TelemetryCommand>> {
        let mut map = lock(&self.clients);
        let r = map.get_mut(client_id)?;
        r.pending.retain(|_, tx| !tx.is_closed());
        if r.pending.len() >= PENDING_COMMANDS_MAX {
            return None;
        }
        let (tx, rx) = oneshot::channel();
        r.pending.insert(nonce.to_owned(), tx);
        Some(rx)
    }

    /// Hands a client's answer to whoever waits for `nonce`.
    pub fn answer(&self, client_id: &str, nonce: &str, command: pb::TelemetryCommand) -> bool {
        let tx = lock(&self.clients).get_mut(client_id).and_then(|r| r.pending.remove(nonce));
        tx.is_some_and(|tx| tx.send(command).is_ok())
    }

    /// How many clients are known.
    pub fn len(&self) -> usize {
        lock(&self.clients).len()
    }

    /// Whether no client is known.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn consumer() -> ClientRecord {
        ClientRecord::new(ClientType::SimpleConsumer, pb::Settings::default(), "PYTHON", "5.1.2", None)
    }

    #[tokio::test]
    async fn a_request_waits_for_settings_on_their_way_and_no_longer_than_asked() {
        let registry = Arc::new(ClientRegistry::default());
        let wait = Duration::from_millis(50);
        assert_eq!(registry.touch_when_known("c1", wait, |r| r.client_type).await, None);

        // Settings stored while the request waits: it goes on with them.
        let storing = registry.clone();
        let store = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(30)).await;
            storing.upsert("c1", consumer()).expect("room");
        });
        let found = registry.touch_when_known("c1", Duration::from_secs(10), |r| r.client_type).await;
        assert_eq!(found, Some(ClientType::SimpleConsumer));
        store.await.unwrap();

        // Another client's Settings do not end the wait of one still unknown.
        let storing = registry.clone();
        let other = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(10)).await;
            storing.upsert("c2", consumer()).expect("room");
        });
        assert_eq!(registry.touch_when_known("c3", Duration::from_millis(100), |r| r.client_type).await, None);
        other.await.unwrap();
    }
}
