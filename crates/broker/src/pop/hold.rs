//! Parked pops and notifications (long polling for POP): a POP_MESSAGE or NOTIFICATION that
//! finds nothing waits here, by topic and group, until a message arrives for it (any of its
//! queues, its retry topic included) or its poll time runs out, and is then processed again.
//! Bounded: `maxPopPollingSize` in all, `popPollingSize` per `topic@group@queueId`,
//! `popPollingMapSize` keys; past a bound the request is answered POLLING_FULL. Java:
//! `PopLongPollingService`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use ferromq_protocol::pop::{parse_pop_retry_topic_v2, RETRY_GROUP_TOPIC_PREFIX};
use ferromq_protocol::RemotingCommand;
use ferromq_remoting::Connection;
use tokio::sync::mpsc;
use tracing::warn;

/// What a parked request is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PollKind {
    /// POP_MESSAGE.
    Pop,
    /// NOTIFICATION.
    Notification,
}

/// Who waits for a parked request.
#[derive(Debug)]
pub(crate) enum Waiter {
    /// A remoting request: processed again on release and answered on its connection.
    Remote { conn: Connection, request: RemotingCommand },
    /// A service caller (`Service::pop`) awaiting the release; it processes again itself.
    Local(tokio::sync::oneshot::Sender<Release>),
}

impl Waiter {
    /// Whether nobody waits any more: the connection closed, or the caller dropped its call.
    pub(crate) fn is_gone(&self) -> bool {
        match self {
            Waiter::Remote { conn, .. } => conn.is_closed(),
            Waiter::Local(tx) => tx.is_closed(),
        }
    }
}

/// A parked request.
#[derive(Debug)]
pub(crate) struct HeldPop {
    pub(crate) id: u64,
    pub(crate) kind: PollKind,
    pub(crate) waiter: Waiter,
    pub(crate) queue_id: i32,
    pub(crate) deadline: Instant,
    /// Tag hash codes the request's filter accepts; `None` accepts everything.
    pub(crate) tag_codes: Option<Vec<i64>>,
}

/// Why a parked request was released.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Release {
    /// Something arrived: process it again (it may park again while time is left).
    Arrived,
    /// Its poll time ran out (or its connection closed): answer it.
    Expired,
}

/// The limits of the hold.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HoldLimits {
    pub(crate) max_total: usize,
    pub(crate) per_key: usize,
    pub(crate) max_keys: usize,
    /// Every this many queue offsets an arrival wakes a request whatever its filter.
    pub(crate) force_notify_interval: i64,
}

type Parked = HashMap<String, HashMap<String, Vec<HeldPop>>>;

/// Parked pops and notifications, by topic, then group.
#[derive(Debug)]
pub(crate) struct PopHold {
    parked: Mutex<Parked>,
    count: AtomicUsize,
    next_id: AtomicU64,
    limits: HoldLimits,
    wake: mpsc::Sender<(HeldPop, Release)>,
}

impl PopHold {
    /// A hold; released requests go to the returned receiver.
    pub(crate) fn new(limits: HoldLimits) -> (PopHold, mpsc::Receiver<(HeldPop, Release)>) {
        // The channel never holds more than what was parked.
        let (wake, rx) = mpsc::channel(limits.max_total.max(1));
        let hold = PopHold {
            parked: Mutex::new(HashMap::new()),
            count: AtomicUsize::new(0),
            next_id: AtomicU64::new(1),
            limits,
            wake,
        };
        (hold, rx)
    }

    fn parked(&self) -> std::sync::MutexGuard<'_, Parked> {
        self.parked.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Requests parked now.
    pub(crate) fn len(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    /// A fresh id for a request about to be parked.
    pub(crate) fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Parks `held` for (`topic`, `group`). Gives it back when a bound is reached.
    pub(crate) fn park(&self, topic: &str, group: &str, held: HeldPop) -> Result<(), Box<HeldPop>> {
        let mut parked = self.parked();
        if self.count.load(Ordering::Acquire) >= self.limits.max_total {
            return Err(Box::new(held));
        }
        let is_new_key = !parked.get(topic).is_some_and(|g| g.contains_key(group));
        // Counted only when a key would be added: parking on a known key stays O(1).
        if is_new_key && parked.values().map(HashMap::len).sum::<usize>() >= self.limits.max_keys {
            return Err(Box::new(held));
        }
        let list = parked.entry(topic.to_owned()).or_default().entry(group.to_owned()).or_default();
        if list.iter().filter(|h| h.queue_id == held.queue_id).count() >= self.limits.per_key {
            return Err(Box::new(held));
        }
        list.push(held);
        self.count.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// Requests parked for `topic@group@queue_id` (POLLING_INFO).
    pub(crate) fn polling_num(&self, topic: &str, group: &str, queue_id: i32) -> usize {
        self.parked()
            .get(topic)
            .and_then(|g| g.get(group))
            .map_or(0, |list| list.iter().filter(|h| h.queue_id == queue_id).count())
    }

    fn release(&self, held: HeldPop, why: Release) {
        self.count.fetch_sub(1, Ordering::AcqRel);
        if let Err(e) = self.wake.try_send((held, why)) {
            // Cannot happen while the channel is as large as the hold; the client times out
            // and asks again.
            warn!(error = %e, "parked pop dropped");
        }
    }

    /// Takes the first request of (`topic`, `group`) that `pick` accepts.
    fn take_one(&self, topic: &str, group: &str, pick: impl Fn(&HeldPop) -> bool) -> Option<HeldPop> {
        let mut parked = self.parked();
        let by_group = parked.get_mut(topic)?;
        let list = by_group.get_mut(group)?;
        let i = list.iter().position(|h| !h.waiter.is_gone() && pick(h))?;
        let held = list.remove(i);
        if list.is_empty() {
            by_group.remove(group);
            if by_group.is_empty() {
                parked.remove(topic);
            }
        }
        Some(held)
    }

    /// A message with `tags_code` arrived in `topic`/`queue_id` at `queue_offset`: wakes one
    /// matching request of each group parked on the topic. A message of a V2 pop retry topic
    /// wakes a request of its group on the original topic. Called from the store's dispatch
    /// thread; never blocks on I/O.
    pub(crate) fn notify_arrival(&self, topic: &str, queue_id: i32, queue_offset: i64, tags_code: i64) {
        if let Some((group, original)) = parse_pop_retry_topic_v2(topic) {
            self.wake_group(original, group);
            return;
        }
        if let Some(rest) = topic.strip_prefix(RETRY_GROUP_TOPIC_PREFIX) {
            // A V1 name (`<group>_<topic>`) cannot be split on its own: match it against the
            // parked (topic, group) pairs. Revived messages arrive here once dispatched, so a
            // pop woken before they were readable is woken again.
            let parked: Vec<(String, String)> = self
                .parked()
                .iter()
                .flat_map(|(t, groups)| groups.keys().map(move |g| (t.clone(), g.clone())))
                .filter(|(t, g)| {
                    rest.len() == g.len() + 1 + t.len()
                        && rest.starts_with(g.as_str())
                        && rest.ends_with(t.as_str())
                        && rest.as_bytes()[g.len()] == b'_'
                })
                .collect();
            for (t, g) in parked {
                self.wake_group(&t, &g);
            }
            return;
        }
        let groups: Vec<String> = match self.parked().get(topic) {
            Some(by_group) => by_group.keys().cloned().collect(),
            None => return,
        };
        let force = self.limits.force_notify_interval > 0 && queue_offset % self.limits.force_notify_interval == 0;
        for group in groups {
            let woken = self.take_one(topic, &group, |h| {
                (h.queue_id < 0 || h.queue_id == queue_id)
                    && (force || h.tag_codes.as_ref().is_none_or(|codes| codes.contains(&tags_code)))
            });
            if let Some(held) = woken {
                self.release(held, Release::Arrived);
            }
        }
    }

    /// Wakes one request of (`topic`, `group`), whatever its filter and queue (a retry
    /// message was put back, a FIFO queue unblocked, a pop left messages behind).
    pub(crate) fn wake_group(&self, topic: &str, group: &str) {
        if let Some(held) = self.take_one(topic, group, |_| true) {
            self.release(held, Release::Arrived);
        }
    }

    /// Wakes the request `id` if it is still parked (something arrived between its read and
    /// its parking).
    pub(crate) fn wake_id(&self, topic: &str, group: &str, id: u64) {
        if let Some(held) = self.take_one(topic, group, |h| h.id == id) {
            self.release(held, Release::Arrived);
        }
    }

    /// Releases every request whose poll time ran out or whose connection closed.
    pub(crate) fn expire(&self, now: Instant) {
        let mut gone = Vec::new();
        {
            let mut parked = self.parked();
            parked.retain(|_, by_group| {
                by_group.retain(|_, list| {
                    let mut i = 0;
                    while i < list.len() {
                        if list[i].deadline <= now || list[i].waiter.is_gone() {
                            gone.push(list.remove(i));
                        } else {
                            i += 1;
                        }
                    }
                    !list.is_empty()
                });
                !by_group.is_empty()
            });
        }
        for held in gone {
            self.release(held, Release::Expired);
        }
    }
}
