//! Sends NOTIFY_CONSUMER_IDS_CHANGED (40) oneway to the members of a consumer group, so they
//! rebalance at once instead of at their next 20 s rebalance tick.
//! Java: `Broker2Client#notifyConsumerIdsChanged`, `DefaultConsumerIdsChangeListener` with
//! `realTimeNotifyConsumerChange`.
//!
//! Callers never wait: each notice runs as a task in a bounded set this notifier owns. A newer
//! notice for a group supersedes an older one still sending, since it goes to the current
//! members anyway. Notices are advisory, so one that cannot be queued or sent in time is
//! dropped with a log line rather than retried. It does not decide when to notify; the
//! consumer manager does.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use ferromq_protocol::header::NotifyConsumerIdsChangedRequestHeader;
use ferromq_protocol::{request_code, LanguageCode, RemotingCommand};
use ferromq_remoting::Connection;
use tokio::runtime::Handle;
use tokio::task::JoinSet;
use tracing::{debug, warn};

/// Notices being sent at once; past it new ones are dropped.
const MAX_NOTIFY_TASKS: usize = 1024;

/// How long one notice may wait for room in a connection's write queue. The queue is only
/// full when the client stopped reading, and the notice is advisory.
const NOTIFY_SEND_TIMEOUT: Duration = Duration::from_secs(1);

/// Group -> generation of its newest notice.
type Generations = Arc<Mutex<HashMap<String, u64>>>;

/// The owner of the notice-sending tasks.
pub(crate) struct ConsumerIdsNotifier {
    tasks: Mutex<JoinSet<()>>,
    generations: Generations,
    next_generation: AtomicU64,
    /// The runtime current at construction, for callers outside any runtime (a scan thread).
    runtime: Option<Handle>,
}

impl std::fmt::Debug for ConsumerIdsNotifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsumerIdsNotifier").field("tasks", &lock(&self.tasks).len()).finish_non_exhaustive()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Both guarded values stay consistent under single inserts and removes.
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl ConsumerIdsNotifier {
    pub(crate) fn new() -> Self {
        ConsumerIdsNotifier {
            tasks: Mutex::new(JoinSet::new()),
            generations: Arc::new(Mutex::new(HashMap::new())),
            next_generation: AtomicU64::new(1),
            runtime: Handle::try_current().ok(),
        }
    }

    /// Starts sending the notice for `group` to each of `connections` and returns at once.
    pub(crate) fn notify(&self, group: &str, connections: Vec<Connection>) {
        if connections.is_empty() {
            return;
        }
        let Some(runtime) = Handle::try_current().ok().or_else(|| self.runtime.clone()) else {
            warn!(consumer_group = group, "no async runtime; consumer ids change notice dropped");
            return;
        };
        let mut tasks = lock(&self.tasks);
        while let Some(done) = tasks.try_join_next() {
            if let Err(e) = done {
                warn!(error = %e, "consumer ids change notice task failed");
            }
        }
        if tasks.len() >= MAX_NOTIFY_TASKS {
            warn!(consumer_group = group, max = MAX_NOTIFY_TASKS, "too many notices in flight; notice dropped");
            return;
        }
        let generation = self.next_generation.fetch_add(1, Ordering::Relaxed);
        lock(&self.generations).insert(group.to_owned(), generation);
        let send = send_notices(group.to_owned(), generation, connections, self.generations.clone());
        tasks.spawn_on(send, &runtime);
    }

    /// Waits until every notice started before this call has been sent or given up.
    pub(crate) async fn flush(&self) {
        let mut tasks = std::mem::take(&mut *lock(&self.tasks));
        while let Some(done) = tasks.join_next().await {
            if let Err(e) = done {
                warn!(error = %e, "consumer ids change notice task failed");
            }
        }
    }
}

async fn send_notices(group: String, generation: u64, connections: Vec<Connection>, generations: Generations) {
    let header = NotifyConsumerIdsChangedRequestHeader { consumer_group: group.clone() };
    let mut request = RemotingCommand::request(request_code::NOTIFY_CONSUMER_IDS_CHANGED).with_header(&header);
    // The Java broker's requests say JAVA; clients see the same here.
    request.language = LanguageCode::Java;
    for connection in connections {
        if lock(&generations).get(&group) != Some(&generation) {
            debug!(consumer_group = %group, "consumer ids change notice superseded by a newer one");
            return;
        }
        if connection.is_closed() {
            continue;
        }
        match tokio::time::timeout(NOTIFY_SEND_TIMEOUT, connection.invoke_oneway(request.clone())).await {
            Ok(Ok(())) => {
                debug!(consumer_group = %group, connection_id = connection.id(), "consumer ids change notice sent")
            }
            Ok(Err(e)) => {
                debug!(consumer_group = %group, connection_id = connection.id(), error = %e, "consumer ids change notice not sent")
            }
            Err(_) => warn!(consumer_group = %group, connection_id = connection.id(),
                remote_addr = %connection.remote_addr(), "consumer ids change notice timed out; client not reading"),
        }
    }
    let mut generations = lock(&generations);
    if generations.get(&group) == Some(&generation) {
        generations.remove(&group);
    }
}
