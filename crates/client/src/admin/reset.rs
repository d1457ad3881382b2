//! Resetting a consumer group's offsets on a topic to a point in time, on every broker of the
//! topic, as mqadmin's resetOffsetByTime and rocketmq-dashboard's reset do. Java:
//! `DefaultMQAdminExtImpl#resetOffsetByTimestamp` and `#resetOffsetByTimestampOld`.

use ferromq_protocol::body::{MessageQueue, OffsetWrapper};
use ferromq_protocol::response_code;

use crate::admin::client::AdminClient;
use crate::admin::error::AdminError;

/// One queue of a reset. Java: `RollbackStats`. Resets done by the brokers report only the new
/// offset (`rollback_offset`); the other figures are 0 then, as in Java.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RollbackStats {
    /// The queue.
    pub queue: MessageQueue,
    /// The queue's maximum offset.
    pub broker_offset: i64,
    /// The group's offset before the reset.
    pub consumer_offset: i64,
    /// The offset found for the time asked.
    pub timestamp_offset: i64,
    /// The group's offset now.
    pub rollback_offset: i64,
}

/// What a reset did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResetOutcome {
    /// True when no broker could reset through online consumers, so the offsets were
    /// committed by this client (the group was offline).
    pub offline: bool,
    /// Every queue reset, in broker then queue order.
    pub stats: Vec<RollbackStats>,
}

/// The offset an offline reset commits: the one found by time when forced or when it moves
/// the group back, else none (the group keeps its offset).
/// Java: `DefaultMQAdminExtImpl#resetOffsetConsumeOffset`.
pub fn rollback_to(force: bool, timestamp_offset: i64, consumer_offset: i64) -> Option<i64> {
    (force || timestamp_offset <= consumer_offset).then_some(timestamp_offset)
}

impl AdminClient {
    /// Resets `group`'s offsets on `topic` to the first message stored at or after `timestamp_ms`
    /// (-1: the end of every queue), on every broker of the topic's route. Brokers reset through
    /// the online consumers; when a broker answers that no consumer is online, the offsets are
    /// committed here instead, on every broker (queues the group has no offset on start from
    /// their minimum), moving a group forward only with `force`.
    ///
    /// # Errors
    /// The first broker refusal other than "consumer not online", or a transport failure.
    pub async fn reset_group_offset_by_time(
        &self,
        topic: &str,
        group: &str,
        timestamp_ms: i64,
        force: bool,
    ) -> Result<ResetOutcome, AdminError> {
        let brokers = self.route_brokers(topic).await?;
        let mut stats = Vec::new();
        for (_, addr) in &brokers {
            match self.reset_offset_by_time(addr, topic, group, timestamp_ms, force).await {
                Ok(body) => stats.extend(body.offset_table.into_iter().map(|(queue, offset)| RollbackStats {
                    queue,
                    broker_offset: 0,
                    consumer_offset: 0,
                    timestamp_offset: 0,
                    rollback_offset: offset,
                })),
                Err(AdminError::Response { code: response_code::CONSUMER_NOT_ONLINE, .. }) => {
                    let stats = self.reset_offline_group(&brokers, topic, group, timestamp_ms, force).await?;
                    return Ok(ResetOutcome { offline: true, stats });
                }
                Err(e) => return Err(e),
            }
        }
        Ok(ResetOutcome { offline: false, stats })
    }

    async fn reset_offline_group(
        &self,
        brokers: &[(String, String)],
        topic: &str,
        group: &str,
        timestamp_ms: i64,
        force: bool,
    ) -> Result<Vec<RollbackStats>, AdminError> {
        let mut stats = Vec::new();
        for (broker_name, addr) in brokers {
            let consumed = self.consume_stats(addr, group, Some(topic)).await?;
            let mut queues: Vec<(MessageQueue, OffsetWrapper)> =
                consumed.offset_table.into_iter().filter(|(q, _)| q.topic == topic).collect();
            if queues.is_empty() {
                let table = self.topic_stats(addr, topic).await?;
                queues = table
                    .offset_table
                    .into_iter()
                    .filter(|(q, _)| &q.broker_name == broker_name)
                    .map(|(q, t)| {
                        let wrapper = OffsetWrapper {
                            broker_offset: t.max_offset,
                            consumer_offset: t.min_offset,
                            ..OffsetWrapper::default()
                        };
                        (q, wrapper)
                    })
                    .collect();
            }
            for (queue, wrapper) in queues {
                let timestamp_offset = if timestamp_ms == -1 {
                    self.max_offset(addr, &queue).await?
                } else {
                    self.search_offset(addr, &queue, timestamp_ms).await?
                };
                let mut rollback_offset = wrapper.consumer_offset;
                if let Some(offset) = rollback_to(force, timestamp_offset, wrapper.consumer_offset) {
                    self.update_consumer_offset(addr, group, topic, queue.queue_id, offset).await?;
                    rollback_offset = offset;
                }
                stats.push(RollbackStats {
                    queue,
                    broker_offset: wrapper.broker_offset,
                    consumer_offset: wrapper.consumer_offset,
                    timestamp_offset,
                    rollback_offset,
                });
            }
        }
        Ok(stats)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offline_reset_moves_back_always_and_forward_only_when_forced() {
        assert_eq!(rollback_to(false, 3, 10), Some(3));
        assert_eq!(rollback_to(false, 10, 10), Some(10));
        assert_eq!(rollback_to(false, 12, 10), None);
        assert_eq!(rollback_to(true, 12, 10), Some(12));
    }
}
