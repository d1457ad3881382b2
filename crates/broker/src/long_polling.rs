//! Parked pulls (long polling): a pull that finds nothing waits here until a message for its
//! queue arrives or its suspend time runs out, and is then processed again and answered on its
//! connection. Java: `PullRequestHoldService`, `NotifyMessageArrivingListener`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use ferromq_protocol::RemotingCommand;
use ferromq_remoting::Connection;
use tokio::sync::mpsc;
use tracing::warn;

/// A parked pull.
#[derive(Debug)]
pub struct HeldPull {
    /// Where to answer.
    pub conn: Connection,
    /// The original request, processed again on wake-up.
    pub request: RemotingCommand,
    /// The queue offset the pull asked for.
    pub pull_from: i64,
    /// When to give up waiting.
    pub deadline: Instant,
    /// Tag hash codes the subscription accepts; `None` accepts every message.
    pub tag_codes: Option<Vec<i64>>,
    /// A static topic's logic queue read through this physical one: how to answer in logic
    /// terms.
    pub logic: Option<Box<crate::processor::static_topic::PullMapping>>,
}

/// Why a held pull was released.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Release {
    /// A matching message arrived.
    Arrived,
    /// The suspend time ran out.
    Expired,
}

/// Parked pulls by topic, then queue id: found by `&str` without building a key (every
/// dispatched message looks up its queue here).
type Held = HashMap<String, HashMap<i32, Vec<HeldPull>>>;

/// The parked pulls, by topic queue.
#[derive(Debug)]
pub struct PullHold {
    held: Mutex<Held>,
    count: AtomicUsize,
    capacity: usize,
    wake: mpsc::Sender<(HeldPull, Release)>,
}

impl PullHold {
    /// A hold for at most `capacity` pulls; released pulls go to the returned receiver.
    pub fn new(capacity: usize) -> (PullHold, mpsc::Receiver<(HeldPull, Release)>) {
        // The channel can never hold more than the pulls that were parked.
        let (wake, rx) = mpsc::channel(capacity.max(1));
        (PullHold { held: Mutex::new(HashMap::new()), count: AtomicUsize::new(0), capacity, wake }, rx)
    }

    fn held(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes the pulls of `topic`/`queue_id` that `released` picks, dropping emptied entries.
    fn take(&self, topic: &str, queue_id: i32, released: impl Fn(&HeldPull) -> bool) -> Vec<HeldPull> {
        let mut held = self.held();
        let Some(queues) = held.get_mut(topic) else { return Vec::new() };
        let Some(list) = queues.get_mut(&queue_id) else { return Vec::new() };
        let (wake, keep): (Vec<HeldPull>, Vec<HeldPull>) = list.drain(..).partition(released);
        *list = keep;
        if list.is_empty() {
            queues.remove(&queue_id);
            if queues.is_empty() {
                held.remove(topic);
            }
        }
        wake
    }

    /// Parks a pull. Returns it back when the hold is full (the caller answers SYSTEM_BUSY).
    pub fn park(&self, topic: &str, queue_id: i32, pull: HeldPull) -> Result<(), Box<HeldPull>> {
        if self.count.fetch_add(1, Ordering::AcqRel) >= self.capacity {
            self.count.fetch_sub(1, Ordering::AcqRel);
            return Err(Box::new(pull));
        }
        let mut held = self.held();
        let queues = match held.get_mut(topic) {
            Some(queues) => queues,
            None => held.entry(topic.to_owned()).or_default(),
        };
        queues.entry(queue_id).or_default().push(pull);
        Ok(())
    }

    /// Number of parked pulls.
    pub fn len(&self) -> usize {
        self.count.load(Ordering::Acquire)
    }

    fn release(&self, pull: HeldPull, why: Release) {
        self.count.fetch_sub(1, Ordering::AcqRel);
        if let Err(e) = self.wake.try_send((pull, why)) {
            // Cannot happen while the channel is as large as the hold; the client's pull times
            // out and it retries.
            warn!(error = %e, "parked pull dropped");
        }
    }

    /// A message at `queue_offset` with `tags_code` arrived in `topic`/`queue_id`: releases the
    /// parked pulls it satisfies. Called from the store's dispatch thread; never blocks.
    pub fn notify_arrival(&self, topic: &str, queue_id: i32, queue_offset: i64, tags_code: i64) {
        let released = self.take(topic, queue_id, |p| {
            queue_offset >= p.pull_from && p.tag_codes.as_ref().is_none_or(|codes| codes.contains(&tags_code))
        });
        for pull in released {
            self.release(pull, Release::Arrived);
        }
    }

    /// Releases pulls whose queue already has messages at or after their offset (checked right
    /// after parking, to close the race with an arrival between the read and the park).
    pub fn recheck(&self, topic: &str, queue_id: i32, max_offset: i64) {
        let released = self.take(topic, queue_id, |p| max_offset > p.pull_from);
        for pull in released {
            self.release(pull, Release::Arrived);
        }
    }

    /// Releases every pull whose deadline has passed (and whose connection closed).
    pub fn expire(&self, now: Instant) {
        let released: Vec<HeldPull> = {
            let mut held = self.held();
            let mut out = Vec::new();
            held.retain(|_, queues| {
                queues.retain(|_, list| {
                    let (gone, keep): (Vec<HeldPull>, Vec<HeldPull>) =
                        list.drain(..).partition(|p| p.deadline <= now || p.conn.is_closed());
                    out.extend(gone);
                    *list = keep;
                    !list.is_empty()
                });
                !queues.is_empty()
            });
            out
        };
        for pull in released {
            self.release(pull, Release::Expired);
        }
    }
}
