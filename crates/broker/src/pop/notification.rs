//! NOTIFICATION (200054): "is there anything to pop?", long-polled like a pop; and
//! POLLING_INFO (200055): how many pops are parked for a queue. Java: `NotificationProcessor`,
//! `PollingInfoProcessor`.

use std::time::{Duration, Instant};

use ferromq_protocol::header::{
    NotificationRequestHeader, NotificationResponseHeader, PollingInfoRequestHeader, PollingInfoResponseHeader,
};
use ferromq_protocol::{response_code, RemotingCommand};
use ferromq_remoting::Connection;

use crate::broker::{now_ms, Broker};
use crate::pop::hold::{HeldPop, PollKind, Waiter};
use crate::processor::{failure, success};

impl Broker {
    /// Whether (`topic`, `group`) has something a pop would get now: its retry topic or a
    /// queue (FIFO: a queue not blocked) with messages past the group's offset.
    fn has_message_to_pop(
        &self,
        topic: &str,
        group: &str,
        queue_id: i32,
        order: bool,
        attempt_id: Option<&str>,
    ) -> bool {
        let backlog = |t: &str, q: i32| {
            let max = self.store.max_offset_in_queue(t, q);
            let offset = self
                .offsets()
                .query_offset(group, t, q)
                .filter(|o| *o >= 0)
                .unwrap_or_else(|| self.store.min_offset_in_queue(t, q));
            max > offset
        };
        if !order {
            for v2 in [false, true] {
                let retry = ferromq_protocol::pop::pop_retry_topic(topic, group, v2);
                if let Some(c) = self.topics().select(&retry) {
                    if (0..c.read_queue_nums).any(|q| backlog(&retry, q)) {
                        return true;
                    }
                }
            }
        }
        let Some(config) = self.topics().select(topic) else { return false };
        let queues: Vec<i32> = if queue_id < 0 { (0..config.read_queue_nums).collect() } else { vec![queue_id] };
        let now = now_ms();
        queues
            .into_iter()
            .any(|q| backlog(topic, q) && !(order && self.pop.order.needs_block(topic, group, q, attempt_id, now)))
    }

    /// NOTIFICATION: answers hasMsg now, or parks until something arrives or the poll time
    /// ends.
    pub(crate) fn notification(
        &self,
        conn: &Connection,
        req: &RemotingCommand,
        allow_park: bool,
    ) -> Option<RemotingCommand> {
        let h: NotificationRequestHeader = match req.decode_header() {
            Ok(h) => h,
            Err(e) => return Some(failure(req, response_code::SYSTEM_ERROR, e.to_string())),
        };
        if let Err(r) = self.check_peek_target(req, conn, &h.topic, &h.consumer_group, h.queue_id) {
            return Some(*r);
        }
        let queue_id = h.queue_id.max(-1);
        let order = h.order.unwrap_or(false);
        let answer = |has_msg: bool, polling_full: Option<bool>| {
            Some(success(req).with_header(&NotificationResponseHeader { has_msg, polling_full }))
        };
        let dispatched_before = self.store.dispatched_phy_offset();
        if self.has_message_to_pop(&h.topic, &h.consumer_group, queue_id, order, h.attempt_id.as_deref()) {
            return answer(true, None);
        }
        let born = if h.born_time <= 0 { now_ms() } else { h.born_time };
        let left_ms = born + h.poll_time - now_ms();
        if !allow_park || h.poll_time <= 0 || left_ms <= 50 {
            return answer(false, None);
        }
        let id = self.pop.hold.next_id();
        let held = HeldPop {
            id,
            kind: PollKind::Notification,
            waiter: Waiter::Remote { conn: conn.clone(), request: req.clone() },
            queue_id,
            deadline: Instant::now() + Duration::from_millis(left_ms as u64),
            tag_codes: None,
        };
        if self.pop.hold.park(&h.topic, &h.consumer_group, held).is_err() {
            return answer(false, Some(true));
        }
        if self.store.dispatched_phy_offset() != dispatched_before {
            self.pop.hold.wake_id(&h.topic, &h.consumer_group, id);
        }
        None
    }

    /// POLLING_INFO.
    pub(crate) fn polling_info(&self, conn: &Connection, req: &RemotingCommand) -> RemotingCommand {
        let h: PollingInfoRequestHeader = match req.decode_header() {
            Ok(h) => h,
            Err(e) => return failure(req, response_code::SYSTEM_ERROR, e.to_string()),
        };
        if let Err(r) = self.check_peek_target(req, conn, &h.topic, &h.consumer_group, h.queue_id) {
            return *r;
        }
        let n = self.pop.hold.polling_num(&h.topic, &h.consumer_group, h.queue_id.max(-1));
        success(req).with_header(&PollingInfoResponseHeader { polling_num: i32::try_from(n).unwrap_or(i32::MAX) })
    }
}
